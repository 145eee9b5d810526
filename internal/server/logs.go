package server

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// Logs implements api.Backend: it streams a worker's log from the agent
// of the node it ran on (the agent keeps the logs; the server holds none).
func (s *Server) Logs(ctx context.Context, p api.Principal, id string, o api.LogOptions) (io.ReadCloser, error) {
	if err := s.await(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	j, err := s.visible(p, id)
	if err != nil {
		s.mu.RUnlock()
		return nil, err
	}
	// (o.Attempt is the attempt's number, 1, 2, ..., as status lists them;
	// the agent knows it by its process attempt)
	var at *attemptInfo
	num := 0
	for i := len(j.attempts) - 1; i >= 0; i-- {
		if o.Attempt == 0 || int64(j.attempts[i].number(i)) == o.Attempt {
			at, num = &j.attempts[i], j.attempts[i].number(i)
			break
		}
	}
	if at == nil {
		s.mu.RUnlock()
		if o.Attempt != 0 && len(j.attempts) > 0 {
			return nil, api.NotFound("job %s has no attempt %d: its attempts are %d to %d (gandiva status %s lists them)",
				id, o.Attempt, j.attempts[0].number(0), j.attempts[len(j.attempts)-1].number(len(j.attempts)-1), id)
		}
		return nil, api.NotFound("job %s has not run yet: no logs", id)
	}
	if o.Rank >= len(at.nodes) {
		s.mu.RUnlock()
		return nil, api.Invalid("rank", "attempt %d has ranks 0..%d", num, len(at.nodes)-1)
	}
	n := s.m.x.nodes[at.nodes[o.Rank]]
	if n == nil {
		s.mu.RUnlock()
		return nil, api.NotFound("attempt %d of job %s ran on node %s, which is gone: its log went with it", num, id, at.nodes[o.Rank])
	}
	addr, peer, key, attempt := n.addr, n.peer, n.logKey, at.attempt
	s.mu.RUnlock()
	base, err := s.logURL(addr, peer)
	if err != nil {
		return nil, api.Unavailable("node %s: bad log address: %v", n.name, err)
	}
	q := url.Values{"job": {id}, "attempt": {strconv.FormatInt(attempt, 10)}, "rank": {strconv.Itoa(o.Rank)}}
	if o.Tail > 0 {
		q.Set("tail", strconv.FormatInt(o.Tail, 10))
	}
	if o.Follow {
		q.Set("follow", "true")
	}
	rq, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/logs?"+q.Encode(), nil)
	if err != nil {
		return nil, api.Unavailable("node %s: bad address %q: %v", n.name, addr, err)
	}
	nonce := rand.Text()
	rq.Header.Set("Authorization", "Bearer "+key)
	rq.Header.Set(api.LogNonceHeader, nonce)
	resp, err := logClient.Do(rq)
	if err != nil {
		return nil, api.Unavailable("node %s is not reachable for logs: %v", n.name, err)
	}
	if !api.ValidLogProof(resp.Header.Get(api.LogProofHeader), key, nonce, rq.URL.RawQuery) {
		// Not the agent's answer (another service at that address, or a
		// redirect): nothing of it is relayed, not even its text.
		resp.Body.Close()
		return nil, api.Unavailable("node %s: the answer from %s (%s) does not prove it comes from the node's agent; nothing of it is shown", n.name, base, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode == http.StatusNotFound {
			return nil, api.NotFound("node %s has no log for job %s attempt %d rank %d (%s)", n.name, id, num, o.Rank, strings.TrimSpace(string(msg)))
		}
		return nil, api.Unavailable("node %s: %s: %s", n.name, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp.Body, nil
}
