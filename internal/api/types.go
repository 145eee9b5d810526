package api

import (
	"fmt"
	"strings"
	"time"
)

// Version is the API's path prefix. Incompatible changes get a new one.
const Version = "/v1"

// IdempotencyHeader is the request header of POST /v1/jobs that carries
// JobRequest.IdempotencyKey.
const IdempotencyHeader = "Idempotency-Key"

// JobRequest is a submission (POST /v1/jobs). Unknown fields are rejected,
// and so is "user": a job is charged to the user of the token that submits
// it, never to a name the client sends.
type JobRequest struct {
	// Name is a label for people ("resnet-lr0.1"); the server assigns the
	// job's ID. Optional: the command's base name by default.
	Name string `json:"name,omitempty" yaml:"name"`
	// Command is the program and its arguments, run on each node of the
	// gang with the job's GPUs as CUDA_VISIBLE_DEVICES (or once per GPU,
	// with RankPerGPU).
	Command []string `json:"command" yaml:"command"`
	// Env is added to the job's environment (not GANDIVA_* nor
	// CUDA_VISIBLE_DEVICES, which the agent sets).
	Env map[string]string `json:"env,omitempty" yaml:"env"`
	// WorkDir is the job's working directory on the nodes (absolute);
	// empty: a directory of its own under the agent's work root.
	WorkDir string `json:"workdir,omitempty" yaml:"workdir"`
	// GPUs is the gang size; MinGPUs and MaxGPUs make the job elastic.
	GPUs    int `json:"gpus" yaml:"gpus"`
	MinGPUs int `json:"min_gpus,omitempty" yaml:"min_gpus"`
	MaxGPUs int `json:"max_gpus,omitempty" yaml:"max_gpus"`
	// Group ties the jobs of a multi-job (a hyper-parameter search).
	Group string `json:"group,omitempty" yaml:"group"`
	// MemGiB is the peak GPU memory per GPU, which decides what may be
	// packed together (0: unknown, treated as small).
	MemGiB float64 `json:"mem_gib,omitempty" yaml:"mem_gib"`
	// Iters is the job's total mini-batches, when known (for progress and
	// for policies that use remaining work); IterTime an estimate of the
	// seconds per mini-batch on a V100.
	Iters    float64 `json:"iters,omitempty" yaml:"iters"`
	IterTime float64 `json:"iter_time,omitempty" yaml:"iter_time"`
	// Priority orders a user's own jobs where the policy honours it.
	Priority int `json:"priority,omitempty" yaml:"priority"`
	// IdempotencyKey makes a submission safe to retry: a second submission
	// by the same user with the same key and the same request gets the job
	// the first one created (HTTP 200 instead of 201) instead of a new one;
	// with the same key and a different request it is refused (409). The
	// Idempotency-Key header of POST /v1/jobs sets it too. 1 to 255
	// printable ASCII characters; empty: none. Keys are kept as long as the
	// job's record.
	IdempotencyKey string `json:"idempotency_key,omitempty" yaml:"idempotency_key"`
	// PreRun: pre-run the first mini-batch on one GPU before the gang
	// starts; nil means the server's default.
	PreRun *bool `json:"prerun,omitempty" yaml:"prerun"`
	// CheckpointEvery asks the job for a checkpoint this often, in seconds
	// (so it survives the loss of its node); nil: the server's default,
	// 0: never.
	CheckpointEvery *float64 `json:"checkpoint_every,omitempty" yaml:"checkpoint_every"`
	// RankPerGPU runs one process per GPU instead of one per node: each
	// process is a rank of its own (RANK, WORLD_SIZE = the job's GPUs,
	// MASTER_ADDR and MASTER_PORT of rank 0's node) with one device in
	// CUDA_VISIBLE_DEVICES, as torch.distributed's one-process-per-device
	// DDP expects. Ranks are numbered by GPU, in the order of the nodes.
	// Without it every node of the gang runs one process with all of the
	// node's GPUs of the job.
	RankPerGPU bool `json:"rank_per_gpu,omitempty" yaml:"rank_per_gpu"`
}

// Worker is one process of a job's placement: a node's part of it, or
// one GPU's (api.JobRequest.RankPerGPU).
type Worker struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
	Rank int    `json:"rank"`
	// Phase is what the server last heard: assigned, running, suspending,
	// suspended, checkpointing, warming (a warm start's start-up), warm
	// (held at its first mini-batch boundary).
	Phase string `json:"phase"`
	// Attempt is the process attempt this worker belongs to.
	Attempt int64 `json:"attempt"`
}

// WorkersText shows where workers run, as "NODE:GPU,GPU NODE:GPU" (rank
// order as given), for the command line and the demo.
func WorkersText(ws []Worker) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s:%s", w.Node, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(w.GPUs)), ","), "[]")))
	}
	return strings.Join(parts, " ")
}

// Change is one state change of a job.
type Change struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	User     string            `json:"user"`
	Group    string            `json:"group,omitempty"`
	Command  []string          `json:"command"`
	Env      map[string]string `json:"env,omitempty"`
	WorkDir  string            `json:"workdir,omitempty"`
	GPUs     int               `json:"gpus"`
	MinGPUs  int               `json:"min_gpus,omitempty"`
	MaxGPUs  int               `json:"max_gpus,omitempty"`
	MemGiB   float64           `json:"mem_gib,omitempty"`
	Iters    float64           `json:"iters,omitempty"`
	Priority int               `json:"priority,omitempty"`
	// RankPerGPU: one process per GPU (JobRequest.RankPerGPU).
	RankPerGPU bool `json:"rank_per_gpu,omitempty"`

	// State is queued, warming, running, suspended, migrating, finished,
	// failed or cancelled.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// PreRun is "", pending, running, passed, failed, skipped or cancelled.
	PreRun string `json:"prerun,omitempty"`
	// Starting is set while the job's current process starts up (before
	// its first mini-batch boundary): "starting (12 s of ~37 s)". StartUp
	// is its last measured start-up in seconds (0: none yet), and Warm
	// says its process was started ahead of its turn and waits, held at
	// its first mini-batch boundary (state warming, then suspended).
	Starting  string     `json:"starting,omitempty"`
	StartUp   float64    `json:"startup_s,omitempty"`
	Warm      bool       `json:"warm,omitempty"`
	Submitted time.Time  `json:"submitted"`
	Started   *time.Time `json:"started,omitempty"`
	Ended     *time.Time `json:"ended,omitempty"`
	// BackoffUntil is set while a failed job waits to be retried.
	BackoffUntil *time.Time `json:"backoff_until,omitempty"`

	// Done is the mini-batches done, as last reported; IterTime the last
	// measured seconds per mini-batch; Metric the job's last metric.
	Done       float64  `json:"done"`
	IterTime   float64  `json:"iter_time,omitempty"`
	Metric     *float64 `json:"metric,omitempty"`
	Attempts   int      `json:"attempts"`
	Suspends   int      `json:"suspends"`
	Resumes    int      `json:"resumes"`
	Migrations int      `json:"migrations"`
	Packs      int      `json:"packs"`
	// Workers is where it runs (or is suspended) now.
	Workers []Worker `json:"workers,omitempty"`
	// Notes are fall-backs the job went through, said plainly ("suspended
	// with SIGSTOP: no in-job client", "migrated by restart from scratch").
	Notes []string `json:"notes,omitempty"`
	// History is every state change (GET /v1/jobs/{id} only).
	History []Change `json:"history,omitempty"`
	// AttemptList is every attempt of the job, its pre-run's included, in
	// order (GET /v1/jobs/{id} only; the last 1,000).
	AttemptList []Attempt `json:"attempt_list,omitempty"`
	// ETA is the forecast for a job that has not ended; nil before the
	// server's first forecast after its submission.
	ETA *ETA `json:"eta,omitempty"`
	// Summary: the job ended long enough ago that the server keeps only
	// its summary (retention, settings retain/*): Command, Env and
	// WorkDir are empty; the rest is as it was.
	Summary bool `json:"summary,omitempty"`
}

// Attempt is one launch of a job's processes: its first start, a restart
// after a failure, a move (migration, resize, resume elsewhere), a resume
// from a checkpoint, its pre-run.
type Attempt struct {
	// N numbers the job's attempts 1, 2, ... in order: what GET
	// /v1/jobs/{id}/logs?attempt=N (gandiva logs --attempt N) takes.
	N int `json:"n"`
	// PreRun: the attempt ran the job's pre-run (its first mini-batch, on
	// one GPU).
	PreRun bool `json:"prerun,omitempty"`
	// Ranks are its workers by rank: the node and its GPUs there.
	Ranks []AttemptRank `json:"ranks"`
	// Started is when the server made it (nil where the store predates
	// its recording).
	Started *time.Time `json:"started,omitempty"`
	// Ended is when its processes ended, with Outcome saying how
	// (finished; failed: why; checkpointed: to move; lost with node n1
	// ...); nil while it runs, or where the server did not record it.
	Ended   *time.Time `json:"ended,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	// Current: the job's processes now are this attempt's.
	Current bool `json:"current,omitempty"`
}

// AttemptRank is where one rank of an attempt ran.
type AttemptRank struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus,omitempty"`
}

// ETA is when a job is expected to start (a job that waits for GPUs) and
// finish, from the cluster's state forked into the simulator and run
// forward under the server's policy (docs/LIVE.md). A nil time: no estimate
// within the forecast's reach.
//
// When some job's length is unknown (the job's own, or one it waits
// behind or shares with), Start and Finish are medians over Samples
// forecasts that draw the unknown lengths from their priors, and the
// *Low/*High times the 80% band between their 10th and 90th percentiles
// (nil: beyond the forecast's reach, an open band). With Samples 0 or 1
// there is no band: one forecast.
type ETA struct {
	Start  *time.Time `json:"start,omitempty"`
	Finish *time.Time `json:"finish,omitempty"`
	// The band (Samples > 1 only).
	StartLow   *time.Time `json:"start_p10,omitempty"`
	StartHigh  *time.Time `json:"start_p90,omitempty"`
	FinishLow  *time.Time `json:"finish_p10,omitempty"`
	FinishHigh *time.Time `json:"finish_p90,omitempty"`
	Samples    int        `json:"samples,omitempty"`
	// Note states what the estimate rests on (the job's length, declared
	// or assumed; that no other job arrives).
	Note string `json:"note,omitempty"`
	// Forecast is the time of the state the forecast started from.
	Forecast time.Time `json:"forecast"`
}

// JobList is GET /v1/jobs.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

// ServerReason says why one node can or cannot take a job now.
type ServerReason struct {
	Node string `json:"node"`
	Fits bool   `json:"fits"`
	Why  string `json:"why"`
}

// Explanation is GET /v1/jobs/{id}/explain: why a job is where it is.
type Explanation struct {
	Job    string `json:"job"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Policy string `json:"policy"`
	// Summary is one sentence for people.
	Summary string `json:"summary"`
	// Queue names the order the job waits in, as the policy sees it
	// ("submission order", "queue 2 of 3 (attained 4,200 GPU·s; limits
	// 3,250/7,200); ...", "user alice, stride pass 12.5 in server n3").
	Queue string `json:"queue,omitempty"`
	// Position is the job's place among the waiting jobs (1 = next) in the
	// policy's own order (for gandiva-fair, among the jobs of one stride
	// scheduler); 0 when it is not waiting or the policy has not seen it
	// yet. Waiting counts the jobs in that order; AheadGPUs is the GPUs the
	// jobs ahead of it ask for, and Ahead names the first of them (at most
	// 20), next first.
	Position  int      `json:"position"`
	Waiting   int      `json:"waiting"`
	AheadGPUs int      `json:"ahead_gpus"`
	Ahead     []string `json:"ahead,omitempty"`
	// BackoffUntil: the job may not start before (a retry's back-off).
	BackoffUntil *time.Time `json:"backoff_until,omitempty"`
	PreRun       string     `json:"prerun,omitempty"`
	FreeGPUs     int        `json:"free_gpus"`
	TotalGPUs    int        `json:"total_gpus"`
	// Servers gives, per node, whether the gang fits there now and why not.
	Servers []ServerReason `json:"servers"`
	// ETA is the job's forecast (as Job.ETA).
	ETA *ETA `json:"eta,omitempty"`
}

// Node is a GPU node as the API shows it.
type Node struct {
	Name     string `json:"name"`
	GPUType  string `json:"gpu_type"`
	GPUs     int    `json:"gpus"`
	FreeGPUs int    `json:"free_gpus"`
	Up       bool   `json:"up"`
	Drained  bool   `json:"drained"`
	Reason   string `json:"reason,omitempty"`
	// LastSeen is when the server last heard from the node's agent; zero
	// when it has not since the server process started.
	LastSeen time.Time `json:"last_seen,omitempty"`
	Addr     string    `json:"addr,omitempty"`
	// Jobs are the caller's jobs on the node (all jobs for an admin);
	// OtherJobs counts the rest.
	Jobs      []string `json:"jobs,omitempty"`
	OtherJobs int      `json:"other_jobs,omitempty"`
}

// NodeList is GET /v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// Setting is POST /v1/settings (admins): a run-time setting the policy
// reads, such as a user's tickets ("tickets/alice" = "4").
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TokenRequest is POST /v1/tokens (admins).
type TokenRequest struct {
	// User is the user the token belongs to (created if new), for a user token.
	User string `json:"user,omitempty"`
	// Admin makes the user an administrator.
	Admin bool `json:"admin,omitempty"`
	// Agent makes an agent (enrolment) token instead of a user token:
	// Label is the one node name it enrols ("" or "agents": any), Uses
	// how many nodes (0: 1) and TTL for how many seconds (0: a day).
	Agent bool    `json:"agent,omitempty"`
	Label string  `json:"label,omitempty"`
	Uses  int     `json:"uses,omitempty"`
	TTL   float64 `json:"ttl_s,omitempty"`
}

// TokenCreated is the answer: the secret is shown once, never again.
type TokenCreated struct {
	Token string `json:"token"`
	ID    string `json:"id"`
	User  string `json:"user"`
	Kind  string `json:"kind"`
	// Uses and Expires (agent tokens): the nodes it may enrol, and when it
	// stops working.
	Uses    int       `json:"uses,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// TokenInfo is a token's record as GET /v1/tokens shows it: never its
// secret. Kind is user, agent (an enrolment token) or node (a node's
// credential, Label naming the node).
type TokenInfo struct {
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Kind    string    `json:"kind"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
	// Uses and Expires (agent tokens): the enrolments left, and when it
	// stops working. Unlimited marks an agent token of an older release,
	// which enrols any number of nodes and never expires: revoke it.
	Uses      int       `json:"uses,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	Unlimited bool      `json:"unlimited,omitempty"`
}

// TokenList is GET /v1/tokens.
type TokenList struct {
	Tokens []TokenInfo `json:"tokens"`
}

// WhoAmI is GET /v1/whoami.
type WhoAmI struct {
	User  string `json:"user"`
	Admin bool   `json:"admin"`
	Agent bool   `json:"agent"`
	// Node is the node a node credential is bound to.
	Node   string `json:"node,omitempty"`
	Server string `json:"server"`
	Policy string `json:"policy"`
}

// --- The agent protocol ---

// GPU is one device an agent found.
type GPU struct {
	Index  int     `json:"index"`
	Type   string  `json:"type"`
	MemGiB float64 `json:"mem_gib"`
	UUID   string  `json:"uuid,omitempty"`
}

// Enrolment is POST /v1/agent/enrol, with an agent token: a node asks for
// its own credential. A name that has one is refused (409) until an admin
// removes the node.
type Enrolment struct {
	Name string `json:"name"`
}

// Credential answers an enrolment: the node's own token, bound to its name,
// shown once. The agent keeps it (mode 0600) and uses it for every later
// call; the agent token cannot register, poll or report.
type Credential struct {
	Node  string `json:"node"`
	Token string `json:"token"`
	ID    string `json:"id"`
}

// Leave is POST /v1/agent/leave: an agent shutting down (SIGTERM) tells the
// server, after its jobs have stopped (checkpointed where they have the
// in-job client), so that their workers are requeued at once instead of
// after the node time-out. Reports are those not yet acknowledged.
type Leave struct {
	Node    string   `json:"node"`
	Session string   `json:"session"`
	Reason  string   `json:"reason,omitempty"`
	Reports []Report `json:"reports,omitempty"`
}

// Registration is POST /v1/agent/register: an agent (re)joining, with what
// it runs and the reports the server has not acknowledged yet.
type Registration struct {
	// Name identifies the node across restarts (its host name by default).
	Name string `json:"name"`
	GPUs []GPU  `json:"gpus"`
	// HostMemGiB bounds the suspended jobs' state kept in host memory.
	HostMemGiB float64 `json:"host_mem_gib"`
	Rack       string  `json:"rack,omitempty"`
	Domain     int     `json:"domain,omitempty"`
	// Addr is where the agent serves logs (http://host:port, nothing
	// more) and the host name other nodes of a gang reach it by. Unless
	// the server takes addresses as registered (--node-addr any), the
	// server fetches logs from Peer at Addr's port, and a host that is an
	// IP address must be Peer.
	Addr string `json:"addr"`
	// Peer is set by the server (whatever an agent sends is replaced): the
	// IP address the registration came from (its TCP peer).
	Peer string `json:"peer,omitempty"`
	// LogKey is the secret the server presents to fetch logs from the agent.
	LogKey string `json:"log_key"`
	// Incarnation changes every time the agent process starts: a new one
	// means its previous processes are gone.
	Incarnation string `json:"incarnation"`
	// Running are its live job processes.
	Running []Running `json:"running"`
	// Reports are reports not yet acknowledged, in order.
	Reports []Report `json:"reports,omitempty"`
}

// Running is one live job process on an agent.
type Running struct {
	Job     string `json:"job"`
	Attempt int64  `json:"attempt"`
	Rank    int    `json:"rank"`
	// State is running or suspended.
	State string `json:"state"`
	GPUs  []int  `json:"gpus"`
}

// RegistrationReply tells the agent its session.
type RegistrationReply struct {
	Node string `json:"node"`
	// Session names this registration; polls and reports carry it, and
	// the server answers 409 to an older one (the agent re-registers).
	Session string `json:"session"`
	// Lease is how long the agent may go without reaching the server
	// before it must kill its jobs (the server restarts them elsewhere
	// only after a longer silence).
	Lease float64 `json:"lease_s"`
	// CheckpointRoot is where job checkpoints go (shared storage for
	// migration between nodes): the server's checkpoint root, followed by
	// Cluster when that is set.
	CheckpointRoot string `json:"checkpoint_root"`
	// Cluster names the server's store ("c" and 16 hex digits, made with
	// the store; "" for a store made before clusters were named). Job IDs
	// and attempt numbers are unique within one store only, so an agent
	// keeps each cluster's files apart: its logs go under
	// WORK/logs/CLUSTER, and a local mount of the checkpoint root (the
	// agent's --checkpoint-root) is followed by CLUSTER as the server's is.
	Cluster string `json:"cluster,omitempty"`
}

// Want is what the server wants a worker to do.
type Want string

// The wants. The agent makes its processes match them, and reports every
// outcome, including for an assignment it never started: a suspend or
// checkpoint of a process it never had is reported as done (Mode or Outcome
// "not-started"), a kill as exited ("not-started"). A process that no
// assignment names is a stray from an older attempt: the agent kills it and
// reports its exit.
//
// WantWarm is a warm start: start the process if it is not running (like
// run) and hold it at its first mini-batch boundary, suspended with its
// state in host memory (like suspend, which, asked of a process that has not
// said the in-job client's hello yet, waits for the hello, up to the agent's
// client deadline, and then stops it at its next boundary). The process
// reports ready when it reaches that boundary; run resumes it there.
const (
	WantRun        Want = "run"
	WantSuspend    Want = "suspend"
	WantCheckpoint Want = "checkpoint"
	WantKill       Want = "kill"
	WantWarm       Want = "warm"
)

// Assignment is one worker the server wants on a node.
type Assignment struct {
	Job     string `json:"job"`
	Attempt int64  `json:"attempt"`
	Rank    int    `json:"rank"`
	World   int    `json:"world"`
	// User is the job's user: the agent runs the job as the OS account
	// its run-as rule maps the user to.
	User string `json:"user,omitempty"`
	// MasterAddr and MasterPort: rank 0's node, for multi-node gangs.
	MasterAddr string            `json:"master_addr,omitempty"`
	MasterPort int               `json:"master_port,omitempty"`
	Command    []string          `json:"command"`
	Env        map[string]string `json:"env,omitempty"`
	WorkDir    string            `json:"workdir,omitempty"`
	// CheckpointDir is the job's checkpoint directory (shared storage).
	CheckpointDir string `json:"checkpoint_dir"`
	GPUs          []int  `json:"gpus"`
	// Restore starts from the checkpoint.
	Restore bool `json:"restore,omitempty"`
	// PreRun: run only the first mini-batch, then stop (success).
	PreRun bool `json:"prerun,omitempty"`
	Want   Want `json:"want"`
	// ToDisk: suspend to a checkpoint rather than host memory.
	ToDisk bool `json:"to_disk,omitempty"`
	// Unaligned: suspend at once (SIGSTOP), not at the next boundary.
	Unaligned bool `json:"unaligned,omitempty"`
	// CheckpointEvery is the periodic checkpoint interval in seconds (0: none).
	CheckpointEvery float64 `json:"checkpoint_every,omitempty"`
}

// Assignments is GET /v1/agent/assignments: everything the server wants on
// the node. It is level-triggered: the agent makes its processes match it.
type Assignments struct {
	Version uint64       `json:"version"`
	Items   []Assignment `json:"items"`
}

// ReportKind is what a report says.
type ReportKind string

// The report kinds.
const (
	RepStarted  ReportKind = "started"
	RepProgress ReportKind = "progress"
	// RepReady: the process finished its start-up: its first mini-batch
	// boundary passed (Done), Took seconds after its launch; or it said no
	// hello within the agent's client deadline (Message says so).
	RepReady        ReportKind = "ready"
	RepSuspended    ReportKind = "suspended"
	RepResumed      ReportKind = "resumed"
	RepSaved        ReportKind = "saved"
	RepCheckpointed ReportKind = "checkpointed"
	RepExited       ReportKind = "exited"
)

// Report is one thing that happened to a worker.
type Report struct {
	// Seq increases with every report of one agent incarnation.
	Seq     uint64     `json:"seq"`
	Job     string     `json:"job"`
	Attempt int64      `json:"attempt"`
	Rank    int        `json:"rank"`
	Kind    ReportKind `json:"kind"`
	Done    float64    `json:"done,omitempty"`
	// IterTime is the measured seconds per mini-batch (progress).
	IterTime float64  `json:"iter_time,omitempty"`
	Metric   *float64 `json:"metric,omitempty"`
	// Exit (exited, checkpointed): outcome finished, failed, killed,
	// checkpointed, lost (the agent killed it because it could not reach
	// the server for longer than its lease) or not-started; the code;
	// whether the job's own code is to blame.
	Outcome   string `json:"outcome,omitempty"`
	Code      int    `json:"code,omitempty"`
	UserError bool   `json:"user_error,omitempty"`
	// Restart (checkpointed): the job could not save its state and will
	// restart from its previous checkpoint or from scratch.
	Restart bool `json:"restart,omitempty"`
	// Mode (suspended): memory, disk or signal.
	Mode string `json:"mode,omitempty"`
	// Took is how long the mechanism took, in seconds.
	Took    float64 `json:"took,omitempty"`
	Message string  `json:"message,omitempty"`
	// NoClient (ready): the process said no in-job client's hello within
	// the agent's client deadline.
	NoClient bool `json:"no_client,omitempty"`
}

// ReportBatch is POST /v1/agent/reports.
type ReportBatch struct {
	Node    string   `json:"node"`
	Session string   `json:"session"`
	Reports []Report `json:"reports"`
}
