package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/store"
)

// The server's own settings (POST /v1/settings, `gandiva set`): per-user
// quotas, logged like the policy's settings so that they survive restarts.
// "quota/NAME" is the default for every user, "quota/NAME/USER" one user's.
const (
	// QuotaUnended bounds the jobs a user may have that have not ended
	// (queued, running, suspended): a submission beyond it is a 429.
	QuotaUnended = "quota/queued-jobs"
	// QuotaEnvBytes bounds the size of one job's env (the sum of
	// len(name)+len(value)+2 over its variables): beyond it, a 400.
	QuotaEnvBytes = "quota/env-bytes"
)

// quotaSpec is one quota: its default and its range.
type quotaSpec struct {
	def, lo, hi int
	doc         string
}

var quotas = map[string]quotaSpec{
	QuotaUnended:  {def: 10_000, lo: 1, hi: 1_000_000, doc: "jobs a user may have that have not ended"},
	QuotaEnvBytes: {def: 64 << 10, lo: 0, hi: api.MaxBody, doc: "bytes of one job's env"},
}

// ServerSettings lists the settings the server itself reads, for help texts.
func ServerSettings() []string {
	var out []string
	for k, q := range quotas {
		out = append(out, fmt.Sprintf("%s[/USER] (%s; %d to %d, default %d)", k, q.doc, q.lo, q.hi, q.def))
	}
	sort.Strings(out)
	return out
}

// splitQuota finds the quota a key names and the user it is for ("" for
// every user).
func splitQuota(key string) (name, user string, ok bool) {
	for q := range quotas {
		if key == q {
			return q, "", true
		}
		if u, found := strings.CutPrefix(key, q+"/"); found {
			return q, u, true
		}
	}
	return "", "", false
}

// checkSetting validates a setting before it is logged: the server's own
// (quotas) or one the policy reads (policy.SettingsValidator); any other
// key is refused, naming what is read.
func (s *Server) checkSetting(st api.Setting) error {
	if q, user, ok := splitQuota(st.Key); ok {
		if user != "" {
			if err := store.ValidUserName(user); err != nil {
				return api.Invalid("key", "%v", err)
			}
		}
		spec := quotas[q]
		n, err := strconv.Atoi(strings.TrimSpace(st.Value))
		if err != nil || n < spec.lo || n > spec.hi {
			return api.Invalid("value", "%s: want an integer from %d to %d, got %q", st.Key, spec.lo, spec.hi, st.Value)
		}
		return nil
	}
	if v, ok := s.m.eng.Policy().(policy.SettingsValidator); ok {
		reads, err := v.CheckSetting(st.Key, st.Value)
		if err != nil {
			return api.Invalid("value", "%s: %v", st.Key, err)
		}
		if reads {
			return nil
		}
	}
	return api.Invalid("key", "no setting %q: the server reads %s, and policy %s reads %s", st.Key,
		strings.Join(ServerSettings(), ", "), s.cfg.Policy, policyReads(s.m.eng.Policy()))
}

func policyReads(p policy.Policy) string {
	if _, ok := p.(policy.SettingsValidator); ok {
		return "its own (see its documentation)"
	}
	return "none"
}

// quota is the value of quota q for user (its own setting, else the
// default setting, else the built-in default).
func (s *Server) quota(q, user string) int {
	for _, k := range []string{q + "/" + user, q} {
		if v, ok := s.m.settings[k]; ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return quotas[q].def
}

// admit checks a submission against the cluster as registered and the
// user's quotas (under the lock, before its entry is made). A job that can
// never fit the cluster as registered is refused, not queued: it would
// wait forever (blocking a FIFO queue) after burning a GPU on its pre-run.
// So, until a node has registered, every job is refused.
func (s *Server) admit(user string, rq *api.JobRequest) error {
	m := s.m
	total, maxMem := m.c.NumGPUs(), 0.0
	for i := range m.c.Servers {
		maxMem = max(maxMem, m.c.TypeOf(m.c.Servers[i].ID).MemGiB)
	}
	switch {
	case total == 0:
		return api.Invalid("gpus", "no node has registered yet, so no job can run: start the agents first")
	case rq.GPUs > total:
		return api.Invalid("gpus", "%d asked; the cluster as registered has %d GPUs on %d nodes, so this job could never run", rq.GPUs, total, len(m.c.Servers))
	case maxMem > 0 && rq.MemGiB > maxMem:
		return api.Invalid("mem_gib", "%g GiB per GPU asked; the largest GPU of the cluster has %g GiB", rq.MemGiB, maxMem)
	}
	env := 0
	for k, v := range rq.Env {
		env += len(k) + len(v) + 2
	}
	if q := s.quota(QuotaEnvBytes, user); env > q {
		return api.Invalid("env", "%d bytes; the quota is %d (setting %s)", env, q, QuotaEnvBytes)
	}
	if q := s.quota(QuotaUnended, user); m.unended[user] >= q {
		return &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeQuota,
			Message: fmt.Sprintf("user %s has %d jobs that have not ended, the quota (setting %s): wait for some to end or cancel some", user, m.unended[user], QuotaUnended)}
	}
	return nil
}
