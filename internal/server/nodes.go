package server

import (
	"context"
	"errors"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// Node identity and the admin's node and token management.
//
// An agent token (DATA/agent.token, or one an admin makes with `gandiva
// token create --agent`) only enrols nodes: POST /v1/agent/enrol gives a
// node its own credential, bound to its name, once; a name that has one is
// refused until an admin removes the node (which revokes it). Every other
// agent call (register, assignments, reports, leave) needs the credential
// of the node it is about, so no node sees another's assignments (and
// their env) nor reports for another's jobs, and a name cannot be taken
// over.

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
	sec, tok, err := s.db.EnrolNode(e.Name, s.cfg.Clock())
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
	return api.TokenInfo{ID: t.ID, User: t.User, Kind: string(t.Kind), Label: t.Label, Created: t.Created}
}
