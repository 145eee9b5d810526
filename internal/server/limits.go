package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/plural"
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
	// QuotaSpecBytes bounds the size of one job's spec (specBytes: its
	// command, env, workdir and labels): beyond it, a 413.
	QuotaSpecBytes = "quota/spec-bytes"
	// QuotaStoredBytes bounds the spec bytes of the jobs a user has whose
	// full records the server keeps (not ended, or ended and not yet
	// summarised by retention): a submission beyond it is a 429.
	QuotaStoredBytes = "quota/stored-bytes"
	// QuotaRecords bounds the jobs a user has whose full records the
	// server keeps (ended ones included until retention summarises them):
	// a submission beyond it is a 429.
	QuotaRecords = "quota/job-records"
)

// Retention of ended jobs (settings for everyone, no per-user form): an
// ended job's full record (command, env, workdir, idempotency key) is
// dropped, leaving its summary (machine.summarise), once it has been
// ended for RetainEndedFor seconds, or when its user has more than
// RetainEndedJobs ended jobs kept in full (the oldest first). They are
// read by the machine itself, from its logged settings and the entries'
// times, so a replay drops the same records at the same entries.
const (
	RetainEndedFor  = "retain/ended-for"
	RetainEndedJobs = "retain/ended-jobs"
)

// quotaSpec is one quota: its default and its range.
type quotaSpec struct {
	def, lo, hi int
	doc         string
}

var quotas = map[string]quotaSpec{
	QuotaUnended:     {def: 10_000, lo: 1, hi: 1_000_000, doc: "jobs a user may have that have not ended"},
	QuotaEnvBytes:    {def: 64 << 10, lo: 0, hi: api.MaxBody, doc: "bytes of one job's env"},
	QuotaSpecBytes:   {def: 64 << 10, lo: 1 << 10, hi: api.MaxBody, doc: "bytes of one job's spec: command, env, workdir, labels"},
	QuotaStoredBytes: {def: 16 << 20, lo: 0, hi: 1 << 34, doc: "spec bytes of a user's jobs kept in full, ended ones until retention"},
	QuotaRecords:     {def: 20_000, lo: 1, hi: 10_000_000, doc: "jobs of a user kept in full, ended ones until retention"},
}

// retention are the retention settings, for everyone.
var retention = map[string]quotaSpec{
	RetainEndedFor:  {def: 3600, lo: 0, hi: 365 * 86400, doc: "seconds an ended job is kept in full before it is summarised"},
	RetainEndedJobs: {def: 1000, lo: 0, hi: 1_000_000, doc: "ended jobs kept in full per user, the oldest summarised first"},
}

// ServerSettings lists the settings the server itself reads, for help texts.
func ServerSettings() []string {
	var out []string
	for k, q := range quotas {
		out = append(out, fmt.Sprintf("%s[/USER] (%s; %d to %d, default %d)", k, q.doc, q.lo, q.hi, q.def))
	}
	for k, q := range retention {
		out = append(out, fmt.Sprintf("%s (%s; %d to %d, default %d)", k, q.doc, q.lo, q.hi, q.def))
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
	if spec, ok := retention[st.Key]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(st.Value))
		if err != nil || n < spec.lo || n > spec.hi {
			return api.Invalid("value", "%s: want an integer from %d to %d, got %q", st.Key, spec.lo, spec.hi, st.Value)
		}
		return nil
	}
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
func (s *Server) quota(q, user string) int { return s.m.quota(q, user) }

// quota is Server.quota, read from the machine's settings.
func (m *machine) quota(q, user string) int {
	for _, k := range []string{q + "/" + user, q} {
		if v, ok := m.settings[k]; ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return quotas[q].def
}

// retain is the value of retention setting k (its setting, else its
// default).
func (m *machine) retain(k string) int {
	if v, ok := m.settings[k]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n
		}
	}
	return retention[k].def
}

// specBytes is the size of a job's spec that the server keeps in full
// until retention summarises it, and that quota/spec-bytes and
// quota/stored-bytes count: each argument of its command and each
// variable of its env (with a byte or two of separators), its workdir,
// name, group and idempotency key. It is a pure function of the request,
// so a replay counts the same.
func specBytes(rq *api.JobRequest) int {
	n := len(rq.Name) + len(rq.Group) + len(rq.WorkDir) + len(rq.IdempotencyKey)
	for _, a := range rq.Command {
		n += len(a) + 1
	}
	for k, v := range rq.Env {
		n += len(k) + len(v) + 2
	}
	return n
}

// admit checks a submission against the cluster as registered and the
// user's quotas (under the lock, before its entry is made). A job that can
// never fit the cluster as registered is refused, not queued: it would
// wait forever (blocking a FIFO queue) after burning a GPU on its pre-run.
// So, until a node has registered, every job is refused.
func (s *Server) admit(user string, rq *api.JobRequest) error {
	m := s.m
	m.ensureLimits()
	total, nodes, maxMem := m.capacity() // (removed nodes' GPUs do not count)
	switch {
	case total == 0 && len(m.c.Servers) > 0:
		return api.Invalid("gpus", "every node was removed, so no job can run: start the agents of new nodes first")
	case total == 0:
		return api.Invalid("gpus", "no node has registered yet, so no job can run: start the agents first")
	case rq.GPUs > total:
		return api.Invalid("gpus", "%d asked; the cluster as registered has %s on %s (not counting removed ones), so this job could never run", rq.GPUs, plural.Of(total, "GPU"), plural.Of(nodes, "node"))
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
	if n, q := specBytes(rq), s.quota(QuotaSpecBytes, user); n > q {
		return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge, Field: "command",
			Message: fmt.Sprintf("the job's spec (command, env, workdir, labels) is %d bytes; the quota is %d (setting %s)", n, q, QuotaSpecBytes)}
	}
	if q := s.quota(QuotaRecords, user); m.fullJobs[user] >= q {
		return &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeQuota,
			Message: fmt.Sprintf("user %s has %d jobs kept in full (not ended, or ended less than the retention ago), the quota (setting %s): wait for retention (settings %s, %s) to summarise ended ones, or cancel some", user, m.fullJobs[user], QuotaRecords, RetainEndedFor, RetainEndedJobs)}
	}
	if n, q := specBytes(rq), s.quota(QuotaStoredBytes, user); m.stored[user]+n > q {
		return &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeQuota,
			Message: fmt.Sprintf("user %s has %d bytes of job specs kept in full and this job's is %d, beyond the quota of %d (setting %s): wait for retention (settings %s, %s) to summarise ended jobs, or cancel some", user, m.stored[user], n, q, QuotaStoredBytes, RetainEndedFor, RetainEndedJobs)}
	}
	if q := s.quota(QuotaUnended, user); m.unended[user] >= q {
		return &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeQuota,
			Message: fmt.Sprintf("user %s has %d jobs that have not ended, the quota (setting %s): wait for some to end or cancel some", user, m.unended[user], QuotaUnended)}
	}
	return nil
}
