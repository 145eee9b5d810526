package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/plural"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// Node identity and the admin's node and token management.
//
// An agent token (DATA/agent.token, or one an admin makes with `gandiva
// token create --agent`) only enrols nodes: POST /v1/agent/enrol gives a
// node its own credential, bound to its name, once; a name that has one is
// refused until an admin removes the node (which revokes it). An agent
// token enrols a limited number of nodes (each enrolment spends a use, in
// the same store transaction that makes the credential) before it
// expires, and an admin may revoke it at any time: a leaked one is not an
// enrolment secret for ever. Every other agent call (register,
// assignments, reports, leave) needs the credential of the node it is
// about, so no node sees another's assignments (and their env) nor
// reports for another's jobs, and a name cannot be taken over.
//
// A node's log address (Registration.Addr) is where the server fetches
// logs from, on behalf of users: so that a node cannot make the server
// fetch another service's pages (server-side request forgery), the address
// is http://HOST:PORT and nothing more; unless Config.NodeAddr is
// NodeAddrAny, the server fetches from the registration's TCP peer at that
// port (a host given as an IP address must be the peer); it follows no
// redirect; and it relays nothing, not even an error's text, that does not
// carry the agent's proof of its log key for that request (api.LogProof).

// Config.NodeAddr's values.
const (
	// NodeAddrPeer: logs are fetched from the address a node registered
	// from (the default).
	NodeAddrPeer = "peer"
	// NodeAddrAny: from its address as registered (for agents behind NAT or
	// a proxy, or whose log server listens on another interface).
	NodeAddrAny = "any"
)

// Enrolment token defaults: a token an admin makes enrols one node within
// a day unless asked otherwise (as kubeadm's bootstrap tokens last a day);
// the bootstrap DATA/agent.token of a new store enrols up to
// bootstrapEnrol.Uses nodes of any name within a day of its creation.
const DefaultEnrolTTL = 24 * time.Hour

// bootstrapEnrol is the bootstrap agent token's limits.
var bootstrapEnrol = store.EnrolOptions{Label: store.AnyNode, Uses: 16, TTL: DefaultEnrolTTL}

// localEnrolTTL bounds the life of the token NodeToken makes.
const localEnrolTTL = 10 * time.Minute

// reasonRemoved is the reason of a node an admin removed.
const reasonRemoved = "removed by an admin"

// capacity is the cluster as jobs may count on it: the GPUs and nodes of
// every node but those an admin removed (a node that is down only, lost or
// restarting, still counts: it is expected back), and the largest GPU
// memory among them.
func (m *machine) capacity() (gpus, nodes int, maxMem float64) {
	for i := range m.c.Servers {
		sv := &m.c.Servers[i]
		if n := m.x.nodes[sv.Name]; n != nil && n.removed {
			continue
		}
		gpus += sv.NumGPUs
		nodes++
		maxMem = max(maxMem, m.c.TypeOf(sv.ID).MemGiB)
	}
	return gpus, nodes, maxMem
}

// unfit says why a queued job of gpus GPUs cannot run on the cluster as it
// is now, once nodes were removed ("" when it fits, or no node was removed).
func (m *machine) unfit(gpus int) string {
	total, nodes, _ := m.capacity()
	if gpus <= total || nodes == len(m.c.Servers) {
		return ""
	}
	return fmt.Sprintf("needs %s; since nodes were removed the cluster has %d on %s: "+
		"it waits until nodes with enough GPUs join (or cancel it)", plural.Of(gpus, "GPU"), total, plural.Of(nodes, "node"))
}

// Request kinds of the loop that are not entry kinds.
const (
	reqRemove = "remove" // an admin removes a node: entNodeDown
	reqLeave  = "leave"  // its agent leaves: its reports, then entNodeDown
)

// agentMay checks that p may make agent calls for node: only node's own
// credential may.
func agentMay(p api.Principal, node string) error {
	switch {
	case !p.Agent:
		return api.Forbidden("agent calls need a node's credential")
	case p.Node == "":
		return api.Forbidden("an agent token only enrols a node (POST %s/agent/enrol); call with the credential it returns", api.Version)
	case p.Node != node:
		return api.Forbidden("this credential is node %q's, not %q's", p.Node, node)
	}
	return nil
}

// Enrol implements api.Backend: it makes the credential of a node with an
// agent token (one labelled store.AnyNode enrols any name, another only its
// label's).
func (s *Server) Enrol(_ context.Context, p api.Principal, e *api.Enrolment) (*api.Credential, error) {
	label := strings.TrimPrefix(p.User, "agent:")
	switch {
	case !p.Agent || p.Node != "":
		return nil, api.Forbidden("only an agent token enrols a node")
	case label != store.AnyNode && label != e.Name:
		return nil, api.Forbidden("this agent token enrols node %q only, not %q", label, e.Name)
	}
	sec, tok, err := s.db.EnrolNode(e.Name, p.TokenID, s.cfg.Clock())
	if errors.Is(err, store.ErrEnrolToken) {
		return nil, api.Forbidden("this agent token may enrol no more nodes: it was revoked, used up or has expired; "+
			"an admin makes another (gandiva token create --agent --label %s)", e.Name)
	}
	if errors.Is(err, store.ErrNodeEnrolled) {
		return nil, api.Conflict("node %s is enrolled already: its agent must use the credential it got then; "+
			"an admin who wants the name given anew removes the node first (gandiva nodes remove %s)", e.Name, e.Name)
	}
	if err != nil {
		return nil, err
	}
	s.cfg.Log.Info("node enrolled", "node", e.Name, "credential", tok.ID)
	return &api.Credential{Node: e.Name, Token: sec, ID: tok.ID}, nil
}

// Leave implements api.Backend: the agent of p's node is shutting down.
func (s *Server) Leave(ctx context.Context, p api.Principal, l *api.Leave) error {
	if err := agentMay(p, l.Node); err != nil {
		return err
	}
	return s.do(ctx, &req{kind: reqLeave, p: p, leave: l})
}

// leave applies a leave in the loop: the reports (if the session is
// current: they are numbered within it), then the node is down at once, so
// that its jobs are requeued now rather than after the node time-out.
func (s *Server) leave(b *stepBatch, r *req) {
	l := r.leave
	n := s.m.x.nodes[l.Node]
	if n == nil {
		r.err = api.NotFound("no node %q", l.Node)
		return
	}
	// The exits the agent caused by stopping its jobs ("lost") are left
	// out: the node going down requeues those jobs at once (an exit
	// reported lost would be requeued after the retry back-off).
	var reps []api.Report
	for _, rep := range l.Reports {
		if rep.Kind == api.RepExited && rep.Outcome == "lost" {
			continue
		}
		reps = append(reps, rep)
	}
	if n.session != "" && n.session == l.Session && len(reps) > 0 {
		if err := s.add(b, &entry{Kind: entReport, Node: n.name, Reports: reps}); err != nil {
			r.err = api.AsError(err)
			return
		}
	}
	reason := "its agent left"
	if l.Reason != "" {
		reason += ": " + l.Reason
	}
	if err := s.add(b, &entry{Kind: entNodeDown, Node: n.name, Reason: reason}); err != nil {
		r.err = api.AsError(err)
	}
}

// Drain implements api.Backend.
func (s *Server) Drain(ctx context.Context, p api.Principal, node string) error {
	if !p.Admin {
		return api.Forbidden("only admins may drain nodes")
	}
	return s.do(ctx, &req{kind: entDrain, p: p, id: node})
}

// RemoveNode implements api.Backend: the node's credentials are revoked (its
// agent's next call is a 401) and the node is down at once, its jobs
// requeued; it stays listed, down. Its agent may enrol again (with a new
// credential) only after this.
func (s *Server) RemoveNode(ctx context.Context, p api.Principal, node string) error {
	if !p.Admin {
		return api.Forbidden("only admins may remove nodes")
	}
	if err := s.await(ctx); err != nil {
		return err
	}
	gone, err := s.db.RevokeNode(node)
	if err != nil {
		return err
	}
	s.mu.RLock()
	known := s.m.x.nodes[node] != nil
	s.mu.RUnlock()
	if !known && len(gone) == 0 {
		return api.NotFound("no node %q", node)
	}
	s.cfg.Log.Info("node removed", "node", node, "credentials_revoked", len(gone))
	return s.do(ctx, &req{kind: reqRemove, p: p, id: node})
}

// Tokens implements api.Backend.
func (s *Server) Tokens(_ context.Context, p api.Principal) ([]api.TokenInfo, error) {
	if !p.Admin {
		return nil, api.Forbidden("only admins may list tokens")
	}
	ts, err := s.db.Tokens("")
	if err != nil {
		return nil, err
	}
	out := make([]api.TokenInfo, len(ts))
	for i, t := range ts {
		out[i] = tokenInfo(t)
	}
	return out, nil
}

// RevokeToken implements api.Backend.
func (s *Server) RevokeToken(_ context.Context, p api.Principal, id string) (*api.TokenInfo, error) {
	if !p.Admin {
		return nil, api.Forbidden("only admins may revoke tokens")
	}
	t, err := s.db.RevokeToken(id)
	if err != nil {
		if errors.Is(err, store.ErrNoToken) {
			return nil, api.NotFound("%v", err)
		}
		return nil, api.Invalid("id", "%v", err)
	}
	s.cfg.Log.Info("token revoked", "id", t.ID, "user", t.User, "kind", t.Kind)
	info := tokenInfo(t)
	return &info, nil
}

func tokenInfo(t store.Token) api.TokenInfo {
	return api.TokenInfo{ID: t.ID, User: t.User, Kind: string(t.Kind), Label: t.Label, Created: t.Created,
		Uses: t.Uses, Expires: t.Expires, Unlimited: t.Legacy()}
}

// createEnrolToken makes an agent token for an admin's request: Label's
// node only ("" or store.AnyNode: any), Uses nodes (default 1), for TTL
// seconds (default DefaultEnrolTTL).
func (s *Server) createEnrolToken(t api.TokenRequest) (*api.TokenCreated, error) {
	o := store.EnrolOptions{Label: t.Label, Uses: t.Uses, TTL: DefaultEnrolTTL}
	if o.Label == "" {
		o.Label = store.AnyNode
	}
	if o.Uses == 0 {
		o.Uses = 1
	}
	switch {
	case t.TTL < 0 || t.TTL > store.MaxEnrolTTL.Seconds() || math.IsNaN(t.TTL):
		return nil, api.Invalid("ttl_s", "an agent token lasts 0 (the default, %s) to %v seconds, got %v", DefaultEnrolTTL, store.MaxEnrolTTL.Seconds(), t.TTL)
	case t.TTL > 0:
		o.TTL = time.Duration(t.TTL * float64(time.Second))
	}
	if o.Uses < 0 || o.Uses > store.MaxEnrolUses {
		return nil, api.Invalid("uses", "an agent token enrols 1 to %d nodes, got %d", store.MaxEnrolUses, t.Uses)
	}
	if err := o.Check(); err != nil {
		return nil, api.Invalid("label", "%v", err)
	}
	sec, tok, err := s.db.CreateEnrolToken(o, s.cfg.Clock())
	if err != nil {
		return nil, err
	}
	s.cfg.Log.Info("agent token created", "id", tok.ID, "label", tok.Label, "uses", tok.Uses, "expires", tok.Expires)
	return &api.TokenCreated{Token: sec, ID: tok.ID, User: tok.User, Kind: string(tok.Kind), Uses: tok.Uses, Expires: tok.Expires}, nil
}

// NodeToken makes a single-use agent token that enrols node name only,
// within minutes: for a process that runs the server and its own agent
// (gandiva up), whose agent enrols with it when it has no credential.
func (s *Server) NodeToken(name string) (string, error) {
	sec, _, err := s.db.CreateEnrolToken(store.EnrolOptions{Label: name, Uses: 1, TTL: localEnrolTTL}, s.cfg.Clock())
	return sec, err
}

// warnLegacyTokens logs every agent token of an older release (store.Token.Legacy):
// it enrols any number of nodes and never expires.
func (s *Server) warnLegacyTokens() error {
	ts, err := s.db.Tokens("")
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Legacy() {
			s.cfg.Log.Warn("an agent token of an older release enrols any number of nodes and never expires: "+
				"revoke it (gandiva token revoke ID) and make limited ones (gandiva token create --agent --label NODE)",
				"id", t.ID, "label", t.Label, "created", t.Created)
		}
	}
	return nil
}

// checkAddr checks a registration's log address against the TCP peer it
// came from (api.PeerOf; none for a caller in this process), and records
// the peer in it (Registration.Peer, replacing what the agent sent).
func (s *Server) checkAddr(ctx context.Context, reg *api.Registration) error {
	reg.Peer = ""
	host, _, err := api.ParseNodeAddr(reg.Addr)
	if err != nil {
		return err
	}
	peer, ok := api.PeerOf(ctx)
	if !ok || s.cfg.NodeAddr == NodeAddrAny {
		return nil
	}
	reg.Peer = peer.String()
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap() != peer {
		return api.Forbidden("addr %s: node %s registered from %s, and its log address must be there "+
			"(or the server takes addresses as registered: gandiva server --node-addr any)", reg.Addr, reg.Name, peer)
	}
	return nil
}

// logURL is where the server fetches logs from node n: its registered
// address, or, unless addresses are taken as registered, the peer it
// registered from at that address's port.
func (s *Server) logURL(addr, peer string) (string, error) {
	host, port, err := api.ParseNodeAddr(addr)
	if err != nil {
		return "", err
	}
	if peer != "" && s.cfg.NodeAddr != NodeAddrAny {
		host = peer
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// logClient fetches logs from agents: it follows no redirect (a node
// could send the server anywhere).
var logClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
