package arena

import "math"

// Checkpoints are the checkpoint rules every scheduler's jobs follow alike.
type Checkpoints struct {
	// Every is the period, in seconds of trace time spent progressing, of
	// a job's periodic checkpoints (0: none).
	Every float64 `json:"every_s"`
	// OnTerm: a job whose pods are stopped checkpoints within its grace
	// period and keeps all its progress.
	OnTerm bool `json:"on_term"`
}

// Tracker counts each job's progress in trace time (seconds); it is pure:
// the caller passes the time of each observation. A job progresses only
// while all its pods run (Start to Stop): after an overhead (the start-up,
// and reading its checkpoint when it resumes from one) at one mini-batch
// every iterTime seconds. When its pods stop before its work is done it
// keeps what its last checkpoint saved; the rest is lost.
type Tracker struct {
	ck   Checkpoints
	jobs map[string]*progress
}

type progress struct {
	iters, gpus float64
	kept        float64 // mini-batches saved by the last checkpoint
	running     bool
	start       float64 // when all pods ran
	overhead    float64 // seconds before the first mini-batch
	iterTime    float64
	finishAt    float64
	finishing   bool // the work is done; its pods were told to end
	done        bool
	stops       int     // segments ended before the work was done
	lostGPUSec  float64 // GPU-seconds of progress lost
	doneGPUSec  float64 // GPU-seconds of progress kept so far
	ranGPUSec   float64 // GPU-seconds of the ended segments (all pods running)
	segments    int
}

// NewTracker returns a tracker with checkpoint rules ck.
func NewTracker(ck Checkpoints) *Tracker { return &Tracker{ck: ck, jobs: map[string]*progress{}} }

// Add registers job key with iters mini-batches on gpus GPUs.
func (t *Tracker) Add(key string, iters float64, gpus int) {
	t.jobs[key] = &progress{iters: iters, gpus: float64(gpus)}
}

// Kept is the mini-batches job key's last checkpoint saved (its progress
// when it is not running).
func (t *Tracker) Kept(key string) float64 { return t.jobs[key].kept }

// Start records that all of job key's pods run from now, progressing after
// startup seconds (plus checkpoint seconds when it resumes from a
// checkpoint) at iterTime seconds per mini-batch. It returns the overhead
// charged. A job already running or done is left as it is.
func (t *Tracker) Start(key string, now, iterTime, startup, checkpoint float64) float64 {
	j := t.jobs[key]
	if j == nil || j.running || j.done {
		return 0
	}
	j.running, j.start, j.iterTime = true, now, iterTime
	j.overhead = startup
	if j.kept > 0 && j.kept < j.iters {
		j.overhead += checkpoint
	}
	j.finishAt = now + j.overhead + (j.iters-j.kept)*iterTime
	j.segments++
	return j.overhead
}

// Stop records that job key's pods stopped running now. A job whose work
// was done (Due returned it) keeps it all; another keeps its progress if
// checkpoints on SIGTERM are on, else its progress up to its last periodic
// checkpoint. Stop returns the mini-batches lost.
func (t *Tracker) Stop(key string, now float64) float64 {
	j := t.jobs[key]
	if j == nil || !j.running {
		return 0
	}
	j.running = false
	j.ranGPUSec += math.Max(0, now-j.start) * j.gpus
	if j.finishing {
		j.finishing = false
		j.doneGPUSec += (j.iters - j.kept) * j.iterTime * j.gpus
		j.kept = j.iters
		return 0
	}
	run := math.Max(0, now-j.start-j.overhead) // seconds progressing
	made := math.Min(run/j.iterTime, j.iters-j.kept)
	saved := made
	if !t.ck.OnTerm {
		saved = 0
		if t.ck.Every > 0 {
			saved = math.Min(math.Floor(run/t.ck.Every)*t.ck.Every/j.iterTime, made)
		}
	}
	j.kept += saved
	j.stops++
	lost := made - saved
	j.lostGPUSec += lost * j.iterTime * j.gpus
	j.doneGPUSec += saved * j.iterTime * j.gpus
	return lost
}

// Due returns, in the order of keys, the running jobs whose work is done
// by now and marks them finishing: the caller ends their pods.
func (t *Tracker) Due(now float64, keys []string) []string {
	var out []string
	for _, k := range keys {
		j := t.jobs[k]
		if j != nil && j.running && !j.finishing && !j.done && now >= j.finishAt {
			j.finishing = true
			out = append(out, k)
		}
	}
	return out
}

// Finishing reports whether job key's work is done and its pods were told to end.
func (t *Tracker) Finishing(key string) bool {
	j := t.jobs[key]
	return j != nil && j.finishing
}

// Done records that job key completed (its Job is Complete).
func (t *Tracker) Done(key string, now float64) {
	j := t.jobs[key]
	if j == nil || j.done {
		return
	}
	if j.running {
		t.Stop(key, now)
		if j.kept < j.iters { // completed without the tracker's say: count it done
			j.kept = j.iters
		}
	}
	j.done = true
}

// IsDone reports whether job key was recorded done (Done).
func (t *Tracker) IsDone(key string) bool {
	j := t.jobs[key]
	return j != nil && j.done
}

// Reopen undoes Done for job key, whose work turned out not to be over:
// it may Start again, from what it kept.
func (t *Tracker) Reopen(key string) {
	if j := t.jobs[key]; j != nil {
		j.done = false
	}
}

// Stops is how many times job key's pods stopped before its work was done.
func (t *Tracker) Stops(key string) int { return t.jobs[key].stops }

// LostGPUSeconds is the GPU-seconds of job key's progress lost to stops.
func (t *Tracker) LostGPUSeconds(key string) float64 { return t.jobs[key].lostGPUSec }

// RanGPUSeconds is the GPU-seconds job key held with all its pods running
// (start-ups and checkpoint reads included, progress later lost too), up
// to now for a segment not yet ended.
func (t *Tracker) RanGPUSeconds(key string, now float64) float64 {
	j := t.jobs[key]
	ran := j.ranGPUSec
	if j.running {
		ran += math.Max(0, now-j.start) * j.gpus
	}
	return ran
}
