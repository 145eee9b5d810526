// Package preempt turns a priority order of jobs into actions: which
// waiting jobs start or resume, which running jobs are suspended to make
// room, and on which GPUs. It is the shared back end of the preemptive
// policies (tiresias-l, tiresias-g, sjf, srsf, srtf, optimus).
//
// # Contract
//
// A policy hands Plan every eligible job (holding GPUs or waiting) in its
// priority order, through an iterator that may be stopped early. Plan then
// works as the Tiresias simulator does. Scanning in priority order, a job
// is admitted when its gang fits the GPUs not yet claimed by earlier jobs
// (fit-first: a job that does not fit is skipped, the scan goes on); the
// running jobs that are not admitted are the victims. Then, in one of two
// modes (Planner.FreePreemption):
//
//   - Free preemption (the Tiresias simulator's "count" scheme, with
//     Placement place.Count: GPUs are only counted): every victim is
//     suspended, and the admitted waiting jobs start, those returning to
//     their old GPUs or servers first, the others on any free GPUs.
//   - Costly preemption (the default, with place.Locality): the admission
//     by count decides which
//     running jobs may be suspended (the victims) and which waiting jobs
//     should run. Each admitted waiting job is then placed by the Placer on
//     the free GPUs; when it does not fit, victims are added to the trial
//     pool one at a time, lowest priority first, until it fits; if it still
//     does not fit, the trial is rolled back and the job waits ("does not
//     fit" is a result). Victims that no admitted job needed keep running,
//     so no GPU is emptied for nothing. GPUs left free by admitted jobs
//     that could not be placed are offered, without preemption, to the
//     other waiting jobs (Input.Backfill), in priority order.
//
// The scan stops once every holding job has been seen and fewer GPUs
// remain unclaimed than the smallest waiting gang; from the moment no
// waiting job can be admitted, a policy's Order may skip its waiting jobs
// (Planner.Saturated), so a round costs the jobs it visits, not the queue.
//
// A running job whose process is still starting up (before its first
// mini-batch boundary; engine Options.StartUps) is never a victim: like a
// migrating job, it keeps its GPUs until the next round.
//
// Suspends are aligned to mini-batch boundaries; their cost (and that of
// resuming elsewhere) is charged by the executor, not here. Every action
// list has the suspends first, then the starts and resumes in priority
// order, so the engine validates each start against GPUs already freed.
//
// Sorted is the ordered list of waiting jobs the policies keep between
// rounds, and Merge the k-way merge that walks their sources in priority
// order without materialising the whole order (a round costs the jobs it
// visits, not every queued job). Gate decides which calls to Schedule a
// policy acts on: the instants the Tiresias simulator has events for.
// Profiled, Consolidated and Counted are the placements.
package preempt
