package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls the API: the CLI's and the agent's.
type Client struct {
	// Base is the server's URL ("http://127.0.0.1:7070").
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient makes a client with sensible time-outs (long polls and log
// streams set their own through the context).
func NewClient(base, token string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), Token: token, HTTP: &http.Client{}}
}

// Do sends one request with a JSON body (nil: none) and decodes a JSON
// answer into out (nil: discard). API errors come back as *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, c.Base+path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var env struct {
			Error *Error `json:"error"`
		}
		if json.Unmarshal(data, &env) == nil && env.Error != nil {
			env.Error.Status = resp.StatusCode
			return nil, env.Error
		}
		return nil, &Error{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))}
	}
	return resp, nil
}

// Submit submits a job.
func (c *Client) Submit(ctx context.Context, r *JobRequest) (*Job, error) {
	var j Job
	return &j, c.Do(ctx, http.MethodPost, Version+"/jobs", r, &j)
}

// List lists jobs.
func (c *Client) List(ctx context.Context, o ListOptions) ([]Job, error) {
	q := url.Values{}
	if o.All {
		q.Set("all", "true")
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if len(o.States) > 0 {
		q.Set("state", strings.Join(o.States, ","))
	}
	var l JobList
	err := c.Do(ctx, http.MethodGet, Version+"/jobs?"+q.Encode(), nil, &l)
	return l.Jobs, err
}

// Get inspects one job.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	var j Job
	return &j, c.Do(ctx, http.MethodGet, Version+"/jobs/"+url.PathEscape(id), nil, &j)
}

// Cancel cancels a job.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	var j Job
	return &j, c.Do(ctx, http.MethodPost, Version+"/jobs/"+url.PathEscape(id)+"/cancel", nil, &j)
}

// Explain says why a job is where it is.
func (c *Client) Explain(ctx context.Context, id string) (*Explanation, error) {
	var e Explanation
	return &e, c.Do(ctx, http.MethodGet, Version+"/jobs/"+url.PathEscape(id)+"/explain", nil, &e)
}

// Logs opens a job's log.
func (c *Client) Logs(ctx context.Context, id string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Attempt > 0 {
		q.Set("attempt", strconv.FormatInt(o.Attempt, 10))
	}
	if o.Rank > 0 {
		q.Set("rank", strconv.Itoa(o.Rank))
	}
	if o.Tail > 0 {
		q.Set("tail", strconv.FormatInt(o.Tail, 10))
	}
	if o.Follow {
		q.Set("follow", "true")
	}
	resp, err := c.send(ctx, http.MethodGet, Version+"/jobs/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Nodes lists the nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var l NodeList
	err := c.Do(ctx, http.MethodGet, Version+"/nodes", nil, &l)
	return l.Nodes, err
}

// Undrain returns a drained (blacklisted) node to service (admins).
func (c *Client) Undrain(ctx context.Context, node string) error {
	return c.Do(ctx, http.MethodPost, Version+"/nodes/"+url.PathEscape(node)+"/undrain", nil, nil)
}

// Drain stops new work going to a node (admins); its jobs keep running.
func (c *Client) Drain(ctx context.Context, node string) error {
	return c.Do(ctx, http.MethodPost, Version+"/nodes/"+url.PathEscape(node)+"/drain", nil, nil)
}

// RemoveNode revokes a node's credential and requeues its jobs (admins).
func (c *Client) RemoveNode(ctx context.Context, node string) error {
	return c.Do(ctx, http.MethodDelete, Version+"/nodes/"+url.PathEscape(node), nil, nil)
}

// Tokens lists the tokens' records, never their secrets (admins).
func (c *Client) Tokens(ctx context.Context) ([]TokenInfo, error) {
	var l TokenList
	err := c.Do(ctx, http.MethodGet, Version+"/tokens", nil, &l)
	return l.Tokens, err
}

// RevokeToken revokes a token by its ID or a unique prefix of it (admins).
func (c *Client) RevokeToken(ctx context.Context, id string) (*TokenInfo, error) {
	var t TokenInfo
	return &t, c.Do(ctx, http.MethodDelete, Version+"/tokens/"+url.PathEscape(id), nil, &t)
}

// Enrol asks for this node's credential with an agent token.
func (c *Client) Enrol(ctx context.Context, name string) (*Credential, error) {
	var cr Credential
	return &cr, c.Do(ctx, http.MethodPost, Version+"/agent/enrol", &Enrolment{Name: name}, &cr)
}

// Leave tells the server this agent is shutting down.
func (c *Client) Leave(ctx context.Context, l *Leave) error {
	return c.Do(ctx, http.MethodPost, Version+"/agent/leave", l, nil)
}

// Set changes a run-time setting the policy reads (admins), such as
// "tickets/alice" under gandiva-fair.
func (c *Client) Set(ctx context.Context, s Setting) error {
	return c.Do(ctx, http.MethodPost, Version+"/settings", s, nil)
}

// CreateToken makes a token (admins).
func (c *Client) CreateToken(ctx context.Context, r TokenRequest) (*TokenCreated, error) {
	var t TokenCreated
	return &t, c.Do(ctx, http.MethodPost, Version+"/tokens", r, &t)
}

// WhoAmI says who the token belongs to.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var w WhoAmI
	return &w, c.Do(ctx, http.MethodGet, Version+"/whoami", nil, &w)
}

// Register registers an agent.
func (c *Client) Register(ctx context.Context, r *Registration) (*RegistrationReply, error) {
	var rep RegistrationReply
	return &rep, c.Do(ctx, http.MethodPost, Version+"/agent/register", r, &rep)
}

// Assignments long-polls a node's assignments.
func (c *Client) Assignments(ctx context.Context, node, session string, version uint64, wait time.Duration) (*Assignments, error) {
	q := url.Values{"node": {node}, "session": {session}, "version": {strconv.FormatUint(version, 10)}, "wait": {wait.String()}}
	var a Assignments
	return &a, c.Do(ctx, http.MethodGet, Version+"/agent/assignments?"+q.Encode(), nil, &a)
}

// Report sends reports; nil error means the server has recorded them.
func (c *Client) Report(ctx context.Context, b *ReportBatch) error {
	return c.Do(ctx, http.MethodPost, Version+"/agent/reports", b, nil)
}
