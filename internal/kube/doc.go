// Package kube is Gandiva's Kubernetes shell: `gandiva kube` runs the
// engine and any registered policy against a cluster, a third executor
// beside the simulator's and the live server's. Informers (client-go) turn
// nodes, pods and workloads into engine events; the engine's decisions
// become API calls. Exclusive mode: pods request nvidia.com/gpu and Gandiva
// binds them whole. Shared mode (shared.go): on nodes labelled
// gandiva.io/shared=true, pods carry gandiva.io/gpus and Gandiva suspends,
// resumes and packs them in place through the node agent.
//
// # Workloads
//
// A batch/v1 Job whose pod template has schedulerName "gandiva" is one job
// of the engine: its gang is parallelism pods, each with the template's
// nvidia.com/gpu. Plain pods with schedulerName "gandiva" sharing the label
// gandiva.io/job form one job too (a pod without it is a job of its own);
// their gang is the annotation gandiva.io/gang-size, else the minMember of
// the PodGroup they name (scheduler-plugins' label
// scheduling.x-k8s.io/pod-group or Volcano's annotation
// scheduling.k8s.io/group-name; read once per workload through the
// dispatcher, the workload unseen until the read answers, and one that
// cannot be read counts as none), else the pods that exist. The user a job
// is charged to (fair shares, per-user settings) is its namespace.
// Annotations carry what policies use: gandiva.io/min-gpus, max-gpus
// (elastic), mem-gib, iters with iter-time, group. A workload that cannot
// be scheduled (no GPUs asked for, a bad annotation) gets a Warning Event
// and is left alone.
//
// # Mechanisms (exclusive mode)
//
//   - start: the Job is unsuspended and its placement recorded on it
//     (annotations gandiva.io/state=running, gandiva.io/placement=NODE=GPUS,...);
//     its pods are bound through the binding subresource once all of them
//     exist and every node of the placement has room for them at once: a
//     gang is bound whole or not at all.
//   - suspend: the pods holding GPUs get the DisruptionTarget condition,
//     then one patch sets spec.suspend=true with state=suspended. The Job
//     controller deletes the pods; SIGTERM reaches the in-job client, which
//     checkpoints (GANDIVA_CHECKPOINT_DIR on shared storage) and exits. With
//     a pod failure policy that ignores DisruptionTarget, that counts no
//     failure and the controller creates no new pods until the old ones
//     ended. Jobs without one, and plain pods, are not preemptible (the
//     engine refuses their suspensions, migrations and resizes with
//     RejectNever, and the policy hears of it), unless annotated
//     gandiva.io/preemptible=true.
//   - resume: unsuspend with the new placement (pods restore from the
//     checkpoint: GANDIVA_RESTORE=1); migrate: state=moving and suspended
//     until the old pods are gone, then resumed on the new placement;
//     grow-shrink: the same, with a new parallelism (and completions, for an
//     Indexed Job whose completions equal its parallelism).
//
// Node constraints are Kubernetes': taints and tolerations, node selectors
// and required node affinity, and GPUs held by pods of other schedulers,
// cordoned and NotReady nodes. The Scheduler gives them to the engine
// (engine.Constraints): the policy's view says where each job may run and
// in what pods, and shows the GPUs Gandiva may not use taken; the engine
// refuses an action the job's pods cannot carry out, with a code (retry
// later, never, stale), and the policy hears of it in its next view; a
// binding the API server refuses for good is reported the same way
// (EvActionFailed and Engine.Refused, RejectNever). No GPU is packed in
// exclusive mode.
//
// # Mechanisms (shared mode)
//
// The annotations are package shared's contract with the node agent
// (gandiva agent --kube); the scheduler writes gandiva.io/assign only, the
// agent gandiva.io/agent-status only, and no one else either
// (deploy/base/pods-vap.yaml). The scheduler acts on the assignment it last
// wrote, not on what the annotation shows: one written over it is written
// again, above the other's generation (assignOf, tampered).
//
//   - shared nodes: labelled gandiva.io/shared=true. On each, a reservation
//     pod (namespace Options.Namespace, label gandiva.io/reservation=NODE,
//     Options.ReservationImage, bound at creation through spec.nodeName,
//     tolerating every taint) requests all the node's nvidia.com/gpu, so
//     that no other scheduler hands them out. It is created only while no
//     other scheduler's pod holds a GPU there (until then the node's GPUs
//     are Blocked), recreated when deleted or ended, deleted when the node
//     is no longer shared (or changes its GPU count) once no shared pod is
//     bound there. The label set or removed on a node is the same server
//     of the engine (its host memory changed in place): exclusive jobs
//     running there run on until they end (none is suspended for it), and
//     the reservation is created once no pod holds a GPU there. GPUs that
//     come free for Gandiva with no job's event (a reservation made,
//     another scheduler's pods gone, labels or taints changed) are an
//     EvNodeUp of the node, so that policies look again (computeBlocked).
//   - shared workloads: pod template (or pods) annotated gandiva.io/gpus=N,
//     requesting no nvidia.com/gpu. Fits keeps shared workloads on shared
//     nodes and exclusive ones off them. The engine lets the policy pack
//     shared jobs (Action.Share), lets it suspend one that is not
//     preemptible (in place), and steers a start or resumption of a job
//     whose pods are alive to the GPUs they hold (Pinned).
//   - start: the Job's record as in exclusive mode; each pod gets its
//     assignment (generation 1, running, node-local GPU indices from the
//     engine's GPUs, in chunks of gandiva.io/gpus) and is bound, a gang
//     whole or not at all.
//   - suspend/resume: the next generation, "suspended" or "running" with
//     the same GPUs, on every pod; the pods stay bound. A pod is told to
//     run (or bound) on GPUs only when every other shared pod there has
//     acknowledged its suspension (agent-status: its generation and
//     state), or is meant to run there by the engine (packed), or its
//     agent failed and it is not being deleted: suspensions
//     before resumptions (package handoff's fence, which the live
//     server's executor shares, over the pods rendered as its
//     occupants). One write per pod at a time, carrying the pod's
//     resourceVersion: a generation is never written on a stale view, so
//     it never goes backwards, across failovers too.
//   - move: pods whose GPUs are not the engine's (a migration, a
//     resumption elsewhere, an agent's failure) are replaced as in
//     exclusive mode (the Job suspended until they are gone, then started
//     on the new placement); workloads that are not preemptible are not
//     moved (a Warning Event).
//   - progress: the first pod's agent-status (mini-batches done, seconds
//     per mini-batch) becomes engine profile events.
//
// # Parts
//
// The Scheduler is a loop (one goroutine) over parts shaped like
// kube-scheduler's backend:
//
//   - the work queue (queue.go): informer handlers mark nodes, workloads
//     and the settings dirty; the loop takes every due key at once, nodes
//     first. A key whose API call failed comes back after a per-key
//     exponential back-off (reset when a call for it succeeds); an
//     informer event about it is due at once.
//   - the engine and its executor (exec.go, kexec): the engine's applied
//     actions become intents (run on a placement, suspend, kill) per
//     workload, and the workloads whose intent changed are reconciled.
//     Reconciliation reads intents and the informers' caches, never the
//     engine's job state; events the loop applies outside a round (a
//     finish, a node lost, a move done) settle the intents they change.
//   - the dispatcher (dispatch.go): API calls run on workers, from a
//     bounded queue that never blocks the loop (a call it refuses counts
//     as failed, and is retried), at most one per key (pod, Job, node)
//     at a time, each with the term's context and a timeout of its own.
//     Two dispatchers: bindings, Job patches, reservations and
//     assignments on one; pending pods' waiting conditions and PodGroup
//     reads on the other. The loop itself never calls the API.
//   - the assume cache (cache.go): what the calls changed that the
//     informers do not show yet (pods bound, Jobs patched, shared pods'
//     assignments): assumed when the call is made, confirmed when an
//     informer shows it, forgotten when the call fails or the pod goes,
//     expired if answered and never shown.
//
// # State and crash safety
//
// The API server is the only record. On becoming leader (a Lease; a second
// replica waits) the scheduler rebuilds the engine from the informers'
// caches, once the PodGroups of the plain-pod workloads there are read:
// nodes, then every workload not over, submitted at its creation
// time so FIFO order survives; the first round is a recovery round
// (engine.Engine.Recover) in which a job whose pods run may run only on
// the nodes they use, when those can take it, so a policy that starts it
// keeps them. What
// a restart loses is the policies' history (attained service, fair-share
// passes), which starts again from the restart. Safety does not depend on
// it: a binding of a bound pod fails (the API server refuses a second
// one), a pod is bound only where the node has room counting every pod
// bound there, a suspension is one patch (recorded or not), and every
// later step is read back from the Job's annotations and pods.
//
// # What users see
//
// Events on the Job (Started, Preempted, Suspended, Resumed, Migrating,
// Moving, Resizing, Killed, Waiting with the reason and place in the queue,
// NotSchedulable; shared mode: Suspended and Resumed in place, Packed with
// whom, AgentFailed, Replacing, CannotMove) and on pods (Scheduled), and the PodScheduled=False
// condition of pending pods with the same reason: `kubectl describe`. With
// Options.Dashboard, the web dashboard (package ui) over the leader's state,
// its tokens checked with TokenReview and SubjectAccessReview (ui.go).
package kube
