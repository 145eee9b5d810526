package timeline

import (
	"strings"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// The engine's reasons name the other jobs a transition involved ("preempted
// by NAME", "packed with NAME,NAME"); a viewer who may not see a job's user
// must not read its name there either.

// hiddenJob replaces the name of a job the viewer may not see.
const hiddenJob = "another user's job"

// nameIndex records a job's name for Redact.
func (r *Recorder) nameIndex(name string, id cluster.JobID) {
	if r.byName == nil {
		r.byName = map[string]cluster.JobID{}
	}
	r.byName[name] = id
}

// Redact returns reason with the names of the jobs whose users visible
// rejects replaced by "another user's job" (nil visible: reason as is).
// Names are whole words between spaces, commas and parentheses.
func (r *Recorder) Redact(reason string, visible func(user string) bool) string {
	if visible == nil || reason == "" {
		return reason
	}
	var b strings.Builder
	word := 0
	flush := func(end int) {
		w := reason[word:end]
		if id, ok := r.byName[w]; ok && w != "" && !visible(r.job(id).user) {
			w = hiddenJob
		}
		b.WriteString(w)
	}
	for i := 0; i < len(reason); i++ {
		switch reason[i] {
		case ' ', ',', '(', ')':
			flush(i)
			b.WriteByte(reason[i])
			word = i + 1
		}
	}
	flush(len(reason))
	return b.String()
}
