// Package fair is Gandiva_fair (Chaudhary et al., EuroSys'20): each
// active user receives a share of the cluster's GPU throughput in proportion
// to its tickets, without static partitions, on clusters that mix GPU
// generations, and users trade fast GPUs for slow ones when both gain.
//
// # Tickets and shares
//
// A user's tickets are configured (parameter tickets) or changed at run time
// by an EvSetting event with Key "tickets/<user>" and Value "<n>" (n ≥ 0);
// users without configured tickets get the default (parameter default, 1).
// A user is active while it has a job that is waiting or running. Each GPU
// generation (a pool: the servers of one GPU type) is divided among the
// active users in proportion to tickets: user u's entitlement of type t is
// GPUs(t) × tickets(u) / Σ tickets. Automated trading (below) then moves
// entitlement between users. Within a type, the entitlements are divided by
// water-filling: nobody gets more than the GPUs its jobs there can use, and
// what a user cannot use goes to the others at once, in proportion to their
// entitlements. A user's allocation is split equally among its jobs on that
// type (a job never gets more than its gang size; the rest goes to the
// user's other jobs). A job's allocation, in GPUs, is its stride tickets.
//
// # Split-stride scheduling
//
// Every quantum (parameter quantum, 60 s) each server runs the gang-aware
// stride scheduler of the paper (Stride: pass += size/tickets, fill free GPUs
// in pass order, ties by job ID, i.e. submission order) over the jobs homed
// on it. A job joining a server's scheduler starts half its stride past the
// scheduler's virtual time (Stride.JoinPass; at the virtual time before the
// first quantum), the average position of a client with its stride, so
// that jobs which come and go gain nothing by it.
//
// Holes are filled at the user level (parameter holes, default user). The
// paper's walk stops being a fair order at the first gang that does not fit
// what is left of the server: it hands the hole to whichever smaller jobs
// come next in pass order, that is to users with small gangs, however much
// they have already received. Instead, once the walk meets a runnable job
// that does not fit (Stride.SelectFill), the rest of the server's GPUs go,
// one job at a time, to the fitting job whose user stands lowest on that
// GPU type, ties to the job furthest behind in pass. A user's standing is
// its received ÷ allocated GPU-seconds (the feedback's books, below, plus
// what holes granted it since they were last brought up to date) ÷ the same
// ratio over all users: 1 is exactly its share. A hole-filler is charged
// its pass as any chosen job is, and its grant is booked at once, so the
// next hole, on this server or another, sees it. A hole that only one
// user's gangs fit still goes to that user: the policy never leaves GPUs
// idle to hold a user back. holes=pass is the paper's walk. With parameter
// pack (off by default; it replaces the hole rule), a quantum that the
// paper's walk would leave with idle GPUs instead runs the fullest set of
// jobs that includes the one furthest behind: it raises utilisation but
// biases which gang sizes run.
//
// A job that needs more GPUs than a server of its type has spans servers;
// a central gang-aware stride scheduler per type, whose clients are those
// jobs (sized as the whole servers they claim) and the servers that host
// them (tickets = their local jobs' allocations), decides in which quanta
// such a job runs, the servers it claims sitting out their local schedule.
// Jobs are homed on the least-loaded server of their type (load = Σ
// allocations ÷ GPUs, plus the fraction of time claimed by spanning jobs);
// when the spread of loads in a type exceeds parameter imbalance, jobs move
// from the most to the least loaded server, at most parameter moves started
// jobs per quantum cluster-wide (jobs that never started move freely).
// Between quanta, GPUs that free up (a job ends) are filled at once from the
// server's waiting jobs by the same rule, charged for the rest of the
// quantum. A job stopped at a quantum boundary is suspended at a mini-batch
// boundary and resumed on the same server (the fast path).
//
// Per-server strides give each job its allocation only as well as the
// server's gangs pack and the servers balance. A user-level feedback
// corrects what the hole rule leaves: at each boundary, per user and GPU
// type, the GPU-seconds allocated and the GPU-seconds received (attained
// service, observable live) are brought up to date and forgotten with time
// constant memory (900 s), and the user's jobs' stride tickets on that type
// are scaled by 1 + gain × (owed share − received share) ÷ owed share,
// clamped to [1/2, 2] (gain 4). gain=0 holes=pass is the paper's scheduler
// alone.
//
// # Heterogeneity
//
// The policy learns each job type's (JobSpec.Model) speed on each GPU type
// from profile samples only (cluster.Profile.Solo): until a type has been
// measured on a generation, the next job of that type is placed on that
// generation ("transparent profiling"), and estimates fall back on the GPU
// types' configured generic speeds. A user's jobs are spread over the
// generations in proportion to its entitlements when it has more demand than
// entitlement (each generation then time-slices), else on the generations
// fastest for its job type first. Fairness is thus kept in GPU-time of each
// generation: a user's throughput is what its ticket share of every
// generation gives it, unless it trades that share for one it values more.
//
// # Automated trading
//
// For each GPU type faster than the slowest (by configured speed, fastest
// first), an auction among active users bids each user's measured speedup
// of that type over the slowest type. The highest bidder buys fast-GPU share
// from the lowest bidder that holds some, paying in slow-GPU share at the
// second-highest bid (Vickrey): neither trader sets its own price, so a user
// gains nothing by slowing its jobs on slow GPUs. The trade happens only
// when both gain strictly (seller's bid < price < buyer's bid; with fewer
// than three bidders there is no second price and no trade) and is as large
// as the seller's fast share, the buyer's slow share, the buyer's demand
// for fast GPUs and the seller's demand for more GPUs allow. Trades are
// recomputed whenever jobs come or go, tickets change or profiles change an
// estimate.
//
// # Parameters
//
//	tickets=alice:4/bob:1   users' tickets ("/"-separated user:n pairs)
//	default=1               tickets of users not listed
//	quantum=60              seconds per time-slice quantum
//	trade=true              automated trading between users on heterogeneous clusters
//	price=second            the trade's price: second (the second-highest bid, Vickrey),
//	                        first (the buyer's bid) or midpoint (between the traders'
//	                        bids); the last two are not incentive-compatible and exist
//	                        to test that the gaming check rejects them
//	moves=8                 started jobs moved between servers per quantum, at most
//	imbalance=0.05          load spread within a GPU type that triggers moves
//	gain=4                  strength of the user-level feedback (0: off)
//	memory=900              seconds over which the feedback forgets
//	holes=user              who gets a hole the next gang cannot use: the user
//	                        furthest below its share (user) or the next jobs in
//	                        pass order (pass: the paper's walk)
//	pack=false              pack gangs when the paper's walk would leave GPUs idle
//
// The policy is deterministic (every order ends on job ID or user name), uses
// no clock and no randomness, and never packs two jobs on one GPU. It
// ignores policy.Config's Placement, FreePreemption and TiresiasRules (it
// places gangs on servers of their own either way).
package fair
