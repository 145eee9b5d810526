package ui

import (
	"context"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/timeline"
)

// DataSource is what the dashboard shows. Every method gets the
// authenticated viewer and returns only what the viewer may see: for a
// user who is not an admin, their own jobs by name and the others'
// anonymised (timeline.Query.Visible) or counted (Queue.Hidden). Errors
// that are *api.Error values keep their status; others are 500s. Methods
// may be called concurrently.
type DataSource interface {
	// Summary describes the cluster now.
	Summary(ctx context.Context, v api.Principal) (*Summary, error)
	// Timeline returns the timeline of run (a Run.ID from Summary.Runs;
	// "" is the first, what happened) over the window w.
	Timeline(ctx context.Context, v api.Principal, run string, w Window) (*timeline.Data, error)
	// Shares returns the users' shares of run over time.
	Shares(ctx context.Context, v api.Principal, run string, w Window) (*timeline.Shares, error)
	// Queue returns the waiting jobs, in the policy's own order when it
	// gives one.
	Queue(ctx context.Context, v api.Principal) (*Queue, error)
	// Nodes returns the nodes and their health (api.Node's contract: a
	// user's own jobs by name, the others counted).
	Nodes(ctx context.Context, v api.Principal) ([]api.Node, error)
}

// Window is the time window a request asks for, in engine seconds. To == 0
// means up to now. Step is the shares' window length (0: chosen to give at
// most about 240 windows).
type Window struct {
	From, To, Step float64
}

// Summary is GET /ui/api/summary: what the header and the cards show, and
// Version, which the page polls to learn that something changed.
type Summary struct {
	Cluster string `json:"cluster"`
	Policy  string `json:"policy"`
	// Now is the engine time in seconds; Epoch the Unix time (seconds) of
	// engine time 0, or 0 for simulated time (shown as offsets).
	Now   float64 `json:"now"`
	Epoch float64 `json:"epoch"`
	// Version changes whenever anything the dashboard shows changes.
	Version  uint64 `json:"version"`
	GPUs     int    `json:"gpus"`
	FreeGPUs int    `json:"free_gpus"`
	// Nodes counts nodes by status: "up", "down", "drained".
	Nodes map[string]int `json:"nodes"`
	// Jobs counts the viewer's jobs by state (an admin's: everyone's).
	Jobs map[string]int `json:"jobs"`
	// Runs are the timelines there are: what happened first, then what-if
	// replays or simulations to compare it with.
	Runs   []Run  `json:"runs"`
	Viewer Viewer `json:"viewer"`
	// PollSeconds is how often the page should poll (set by the handler).
	PollSeconds float64 `json:"poll_seconds"`
	// Queues are Kubernetes' hierarchical queues (GandivaQueues), parents
	// before their children; none elsewhere.
	Queues []QueueRow `json:"queues,omitempty"`
}

// QueueRow is one hierarchical queue: its place in the tree, its tickets,
// the GPUs its workloads hold now, the share of the cluster its tickets
// give it now (0 to 1) and that share in GPUs, its quota ("H100: 8") and
// whether it is valid (else why not).
type QueueRow struct {
	Name        string  `json:"name"`
	Parent      string  `json:"parent,omitempty"`
	Depth       int     `json:"depth"`
	Tickets     float64 `json:"tickets"`
	GPUs        int     `json:"gpus"`
	Share       float64 `json:"share"`
	Entitlement float64 `json:"entitlement"`
	Quota       string  `json:"quota,omitempty"`
	Valid       bool    `json:"valid"`
	Why         string  `json:"why,omitempty"`
}

// Run is one timeline: Kind is "live" (what happened), "whatif" (the same
// history replayed under another policy) or "sim" (a simulation).
type Run struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Kind   string `json:"kind"`
	Policy string `json:"policy,omitempty"`
}

// Viewer is who the page is shown to (set by the handler).
type Viewer struct {
	User  string `json:"user"`
	Admin bool   `json:"admin"`
}

// Queue is GET /ui/api/queue: the jobs waiting for GPUs (queued or
// suspended).
type Queue struct {
	Policy string `json:"policy"`
	// Order is "policy" when the jobs are in the policy's own order
	// (its explainer's), "submission" when the policy gives none.
	Order string      `json:"order"`
	Jobs  []QueuedJob `json:"jobs"`
	// Hidden counts the waiting jobs of other users (for a non-admin).
	Hidden int `json:"hidden"`
}

// QueuedJob is one waiting job. Times are engine seconds.
type QueuedJob struct {
	// Position is the job's place in the order (1 = next), counting
	// other users' jobs too.
	Position  int     `json:"position"`
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	User      string  `json:"user"`
	State     string  `json:"state"`
	GPUs      int     `json:"gpus"`
	Submitted float64 `json:"submitted"`
	// Waited is how long it has waited in this wait.
	Waited float64 `json:"waited"`
	// Reason is why it waits, in the policy's words.
	Reason string `json:"reason,omitempty"`
	// ETAStart and ETAFinish are the expected start and finish (engine
	// seconds); nil when there is no estimate. ETANote states the
	// estimate's assumptions. When some length is unknown they are medians
	// over ETASamples forecasts (api.ETA), with the 80% band (p10–p90)
	// in the *Low/*High fields (nil: beyond the forecast's reach); with
	// ETASamples 0 or 1 there is no band.
	ETAStart      *float64 `json:"eta_start"`
	ETAFinish     *float64 `json:"eta_finish"`
	ETANote       string   `json:"eta_note,omitempty"`
	ETAStartLow   *float64 `json:"eta_start_p10,omitempty"`
	ETAStartHigh  *float64 `json:"eta_start_p90,omitempty"`
	ETAFinishLow  *float64 `json:"eta_finish_p10,omitempty"`
	ETAFinishHigh *float64 `json:"eta_finish_p90,omitempty"`
	ETASamples    int      `json:"eta_samples,omitempty"`
}
