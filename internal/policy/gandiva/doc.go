// Package gandiva is the Gandiva policy (the Gandiva paper, OSDI'18; docs/PAPERS.md): an
// introspective scheduler that treats a training job as a loop of
// mini-batches. It is made of mechanisms that other policies can reuse:
//
//   - Homes and over-subscription (Homes): every job is given home GPUs as
//     soon as it arrives, free ones if there are any, otherwise the least
//     loaded ones of the right shape; a GPU can be home to several jobs.
//   - Time-slicing (Slicer): jobs that share home GPUs take turns. Turns
//     change at quantum boundaries (multiples of the quantum, 60 s by
//     default), so the gangs of all servers rotate together and a gang
//     spanning servers switches as a whole. Within a turn the order is
//     least recently run first (round-robin), after any priority from early
//     feedback. Suspend and resume happen at mini-batch boundaries (the
//     engine and executor charge their cost); the state of a suspended job
//     stays in its server's host memory when it fits, else it is
//     checkpointed (the engine decides).
//   - Packing with introspection (Packer): on an over-subscribed GPU, two
//     jobs whose peak memory fits together run at once instead of taking
//     turns; once both have reported a profile sample while packed, the
//     policy compares their normalised progress (each job's packed rate over
//     its measured solo rate, summed) and keeps the packing only if it beat
//     time-slicing (sum ≥ 1 + margin); otherwise it reverts and remembers the
//     pair of models as bad. Rates come from profile events only.
//   - Migration (Migrator): bounded moves that put idle GPUs to work: a
//     waiting job moves from an over-subscribed GPU to idle ones (which also
//     frees servers for large gangs and moves jobs of low parallelism to
//     other, possibly cheaper, GPU generations); a gang spread over servers
//     consolidates when it can; a job on a slow generation moves to an idle
//     fast one when its measured (or nominal) speed-up is worth the move.
//     At most `migrations` moves per round and one per job per `cooldown`.
//     Where start-ups are measured (live), every move is charged the job's
//     own measured start-up and made only when its expected gain exceeds
//     it, and jobs whose state waits on free GPUs get their turn there
//     first (cost.go).
//     A kept packing ends when GPUs sit idle and no job waits for a turn:
//     packing pays only against time-slicing (two jobs that would take turns
//     run together), so with a spare GPU one partner moves there and both run
//     alone at full speed (a bounded move like the others; the pair stays
//     known as good and packs again, without a trial, once jobs wait).
//   - Grow-shrink (Elastic): an elastic job widens onto idle GPUs of its
//     server when nobody waits, keeps the extra GPUs only if its measured
//     rate rose enough, and shrinks back as soon as another job needs them.
//   - Early feedback (Feedback): jobs of one multi-job (the same Group)
//     report a metric; at rungs of progress (1/27, 1/9, 1/3 of their
//     mini-batches by default) the policy ranks the group's reports,
//     successive-halving style: the top 1/η are raised in priority (and run
//     alone, never packed), and once a rung has 2η reports the jobs below
//     its median are dropped, HyperOpt/ASHA style.
//
// Each round's decision is built as a Plan whose GPU ledger is a
// place.Pool (ResetPlan): which job holds each GPU in the plan, which GPUs
// running jobs keep between quantum boundaries; the migrations and growth
// try their moves on a scratch copy of its free GPUs (place.Pool.ResetFrom,
// Restrict, Mark/Rollback).
//
// Profiling: every decision reads the engine's per-job profile history
// (mini-batches done and seconds per mini-batch, per placement), never the
// simulator's model, so the same code runs live.
//
// Parameters (`--policy gandiva:quantum=60;pack=true;...`):
//
//	quantum=60        seconds per time slice
//	pack=true         packing trials
//	pack_margin=0.05  keep a packing if summed normalised progress ≥ 1 + margin
//	migrate=true      migrations
//	migrations=0      migrations per round (0: 1 per 8 GPUs, at least 2)
//	cooldown=600      seconds between two migrations of one job
//	upgrade=1.3       migrate to a faster idle GPU generation if the speed-up is at least this
//	grow=true         grow-shrink of elastic jobs
//	grow_margin=0.5   keep a growth if the rate rose by ≥ margin × the width increase
//	feedback=true     early feedback for groups
//	rung=0.037        first rung, as a fraction of a job's mini-batches
//	eta=3             rung spacing and selection ratio
//	unaligned=false   suspend at once instead of at a mini-batch boundary (≈50× dearer)
//	unpack=true       end a kept packing onto idle GPUs when no job waits (needs migrate)
package gandiva
