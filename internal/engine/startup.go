package engine

import (
	"fmt"
	"slices"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// Start-ups (Options.StartUps). A real training process needs a while to
// reach its first mini-batch boundary: PyTorch on an H100 took 12.8 s to
// import and initialise, and 37 s to finish its first mini-batch (cuDNN's
// autotuning; docs/measurements/h100-2026-11-24.md). That phase is the
// job's start-up: it costs no GPU compute a policy can charge to a quantum,
// and suspending the job in it wastes it.
//
// Every action that launches a new process (Applied.NewProcess: Start,
// Warm, a Resume that moves or restores from a checkpoint, Migrate,
// Resize) starts one: the job is StartingUp, from ProcStart, until the
// executor reports the process's first boundary (EvReady, with the measured
// seconds). The engine then sets ReadyAt and remembers the figure for the
// job (StartUp) and for its family (JobSpec.Family, or its model), whose
// next jobs expect it (StartUpEst). A Resume in place continues a process
// past its start-up: ReadyAt is the resume. Without Options.StartUps nothing
// of this happens: every placement is ready at once, as before.
//
// A process that says no in-job client's hello within the agent's
// deadline is ready then (EvReady with NoClient): it has no boundaries to
// report. Its family's next processes are ready at once, as before
// start-ups were known, and are never warmed (a warm process without the
// client cannot be held at a boundary).
//
// A Suspend of a job still starting up (a policy that does not protect the
// phase) does not stop the process mid-way: it goes on to its first
// boundary and is held there, the job Warming on its last GPUs until
// EvReady makes it Suspended (Applied.StillStarting). Attained service
// counts GPUs held, start-up included (Tiresias' definition of service:
// here the process holds its GPUs for its start-up, cuDNN's autotuning
// included, and runs its own code on them); what is not charged is a
// time-slice quantum (policies count it from ReadyAt).
//
// Uncharged start-ups (Options.StartUpGrace, which Kubernetes turns on).
// There a placement is the start of a chain of API calls: the Job
// unsuspended, its controller making the pods, Gandiva binding them, the
// node pulling images and starting containers; a suspension deletes the
// pods. Until all of a gang's pods run, its GPUs are reserved, but the job
// executes nothing on them, and the time is the control plane's, not the
// job's: minutes at 1x for a large image, and under a replay's faster
// clock thousands of the trace's seconds, enough for a gang of 16 GPUs to
// cross Tiresias' last threshold (7,200 GPU-seconds) before its pods ran.
// So with a grace above 0 a start-up is not charged: Job.Attained and
// Job.Executed (which Tiresias' queues, LAS and the estimates of work left
// read) count a process from its EvReady, which the executor reports when
// all of the gang's pods run, again at each new placement (every Start,
// Resume, Migrate and Resize launches new pods). Service is GPU time the
// job's processes executed, as Tiresias defines it, the start-up of the
// processes themselves (after their pods run) included. A start-up is
// bounded: a job whose pods never all run (an image that cannot be
// pulled, a pod that cannot run) is charged from ProcStart + grace on,
// when its start-up ends (startUpsDue: the engine wakes for it) and the
// policy treats it as any running job, preemptible by a planner that
// spares starting jobs; its pods' running later reports nothing more. A
// Suspend of a starting job stops it at once (its pods are deleted: there
// is no boundary to hold it at), and warm starts are not for such an
// executor.

// family is the start-up family of a spec: its Family, else its model,
// else none.
func family(s *cluster.JobSpec) string {
	switch {
	case s.Family != "":
		return s.Family
	case s.Model != "":
		return "model:" + s.Model
	}
	return ""
}

// newProcess records that j's placement launches a new process, and
// reports whether the executor must report its first boundary.
func (e *Engine) newProcess(j *cluster.Job, now float64) bool {
	e.stopStartUp(j)
	j.ProcStart = now
	if !e.opts.StartUps || e.noClient[family(j.Spec)] {
		j.ReadyAt = now
		return false
	}
	j.StartingUp = true
	j.ReadyAt = -1
	e.starting = insertID(e.starting, j.ID)
	if e.opts.StartUpGrace > 0 {
		j.ChargeFrom(now, now+e.opts.StartUpGrace)
	}
	return true
}

// startUpsDue ends the start-ups that reached their deadline
// (Options.StartUpGrace) by now: the job is ready at the deadline, from
// when its service is charged (newProcess deferred it to then).
func (e *Engine) startUpsDue(now float64) {
	g := e.opts.StartUpGrace
	if g <= 0 || len(e.starting) == 0 {
		return
	}
	var due []cluster.JobID
	for _, id := range e.starting {
		if e.jobs[id].ProcStart+g <= now {
			due = append(due, id)
		}
	}
	for _, id := range due {
		j := e.jobs[id]
		e.stopStartUp(j)
		j.ReadyAt = j.ProcStart + g
		j.Reason = fmt.Sprintf("its processes did not all run within %.0f s of its placement: charged as running since then", g)
		j.Seq++
	}
}

// nextStartUpDue returns the earliest deadline after now of a start-up
// (Options.StartUpGrace), or 0.
func (e *Engine) nextStartUpDue(now float64) float64 {
	g := e.opts.StartUpGrace
	if g <= 0 {
		return 0
	}
	w := 0.0
	for _, id := range e.starting {
		if t := e.jobs[id].ProcStart + g; t > now && (w == 0 || t < w) {
			w = t
		}
	}
	return w
}

// goesOn records that j's process, past its start-up, runs again (a resume
// in place): its turn counts from now.
func (e *Engine) goesOn(j *cluster.Job, now float64) {
	if !j.StartingUp {
		j.ReadyAt = now
	}
}

// stopStartUp ends j's start-up bookkeeping (its process ended or was
// replaced, or is ready).
func (e *Engine) stopStartUp(j *cluster.Job) {
	if !j.StartingUp {
		return
	}
	j.StartingUp = false
	e.starting = removeID(e.starting, j.ID)
}

// ready applies an EvReady: j's process reached its first boundary.
func (e *Engine) ready(j *cluster.Job, ev cluster.Event, now float64) {
	su := ev.StartUp
	if su <= 0 {
		su = now - j.ProcStart
	}
	first := j.PreRunHere && j.StartUp == 0
	e.stopStartUp(j)
	if e.opts.StartUpGrace > 0 {
		j.ChargeFrom(now, now) // charged from its first boundary (startup.go)
	}
	j.ReadyAt = now
	j.StartUp, j.StartUpEst = su, su
	if first {
		j.Reason = fmt.Sprintf("pre-run passed: its first mini-batch ran in %.1f s of start-up, and its process goes on", su)
	}
	if f := family(j.Spec); f != "" {
		e.families[f] = su
		if ev.NoClient {
			e.noClient[f] = true
		}
	}
	if ev.Done > j.Done {
		j.Done, j.DoneAt = ev.Done, now
	}
	j.Seq++
	e.sus.Ready++
	if j.State == cluster.Warming {
		e.warmReady(j, now, su, ev.Reason)
	}
}

// Starting lists the jobs whose current process is starting up, in ID
// order. The slice is the engine's; do not modify it.
func (e *Engine) Starting() []cluster.JobID { return e.starting }

// StartUpText describes j's start-up for people: "starting (12 s of ~37 s)"
// while its process starts up, "" otherwise.
func StartUpText(j *cluster.Job, now float64) string {
	if !j.StartingUp {
		return ""
	}
	s := fmt.Sprintf("starting (%.0f s", j.StartUpDone(now))
	if j.StartUpEst > 0 {
		s += fmt.Sprintf(" of ~%.0f s", j.StartUpEst)
	}
	return s + ")"
}

// checkStartUps verifies the start-up bookkeeping (CheckInvariants).
func (e *Engine) checkStartUps() error {
	var want []cluster.JobID
	for _, j := range e.jobs {
		if !j.StartingUp {
			continue
		}
		switch {
		case !e.opts.StartUps:
			return fmt.Errorf("job %s is starting up, but the executor reports no start-ups", j.Spec.Name)
		case !j.State.Holding() && j.State != cluster.Warming:
			return fmt.Errorf("job %s is starting up in state %s", j.Spec.Name, j.State)
		case j.ReadyAt >= 0:
			return fmt.Errorf("job %s is starting up, but ready since %.3f", j.Spec.Name, j.ReadyAt)
		}
		want = append(want, j.ID)
	}
	if !slices.Equal(want, e.starting) {
		return fmt.Errorf("starting-up list %v, but jobs %v are starting up", e.starting, want)
	}
	return nil
}
