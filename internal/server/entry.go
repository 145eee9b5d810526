package server

import (
	"time"

	"github.com/gandiva-sched/gandiva/internal/api"
)

// Entry kinds: every input of the state machine (machine.go).
const (
	entSubmit   = "submit"
	entCancel   = "cancel"
	entRegister = "register"
	entReport   = "report"
	entNodeDown = "node-down"
	entUndrain  = "undrain"
	entDrain    = "drain"
	entSetting  = "setting"
	entRound    = "round"
	// entRetain applies retention (machine.retainJobs) at its time: the
	// shell logs one when an ended job's full record is due to be dropped
	// and no other entry came (machine.retainDue).
	entRetain = "retain"
)

// entry is one record of the write-ahead log. The machine applies entries in
// log order; applying the same entries to a fresh machine gives the same state,
// which is how the server recovers after a crash.
type entry struct {
	Kind string  `json:"k"`
	T    float64 `json:"t"`
	// submit
	Job *Record `json:"job,omitempty"`
	// cancel (ID), node-down, drain and undrain (Node, Reason), register and report
	ID     string            `json:"id,omitempty"`
	Node   string            `json:"node,omitempty"`
	Reason string            `json:"reason,omitempty"`
	Reg    *api.Registration `json:"reg,omitempty"`
	// Removed (node-down): an admin removed the node; its GPUs no longer
	// count as the cluster's until it registers again.
	Removed bool `json:"removed,omitempty"`
	// report: the reports of one batch, from node
	Reports []api.Report `json:"reports,omitempty"`
	// setting
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
}

// Record is a job as submitted: what it is, whose it is, how to launch it.
// It never changes after submission, but for retention: once the job has
// ended long enough (settings retain/*), the machine replaces it with its
// summary (Summary set; the request without its command, env, workdir and
// idempotency key). It is stored in the jobs bucket (the summary replaces
// it there) and in the submit entry of the log (until compaction).
type Record struct {
	ID        string         `json:"id"`
	User      string         `json:"user"`
	Request   api.JobRequest `json:"request"`
	Submitted time.Time      `json:"submitted"`
	PreRun    bool           `json:"prerun"`
	CkptEvery float64        `json:"checkpoint_every"`
	// Summary: retention dropped the full request (machine.summarise).
	Summary bool `json:"summary,omitempty"`
}

// change is one job state change, recorded in the store's change history.
type change struct {
	Seq    uint64  `json:"seq"` // the log entry that caused it
	Job    string  `json:"job"`
	T      float64 `json:"t"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Reason string  `json:"reason,omitempty"`
}
