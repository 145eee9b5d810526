// Package trace reads job traces and generates synthetic workloads, as
// []*cluster.JobSpec for the simulator.
//
// # Contract
//
// Every spec that Read, ReadFile and Synthetic return passes
// JobSpec.Validate and has:
//   - Name unique: the trace's job id, or a generated "philly-<row>",
//     "gavel-<k>", "synth-<k>" where the trace has none; a duplicate id is
//     an error naming the line (or job);
//   - User non-empty: the trace's user, else "vc-<virtual cluster>" (Philly),
//     else "default";
//   - GPUs >= 1;
//   - Submit in seconds relative to the earliest submission among the kept
//     jobs, so the first job submits at 0 (the Tiresias 60-job trace already
//     starts at 0, so its times are unchanged);
//   - Iters > 0 and IterTime > 0 with Iters × IterTime equal, to float
//     precision, to the trace's run time on the reference GPU (V100);
//   - Model set where the trace names one (lower-cased) or where one is
//     assigned, and MemGiB from the catalog when the catalog knows the model.
//
// The jobs come sorted by (Submit, input order). Options.VC keeps the jobs
// of some virtual clusters; Options.Limit then keeps the first N in that
// order. Zero jobs left is an error.
//
// # Formats
//
//   - Tiresias CSV (job_id,num_gpu,submit_time,iterations,model_name,
//     duration,interval; columns found by header name, extra ones ignored,
//     optional user and vc): Iters = iterations, IterTime =
//     duration/iterations (without iterations: the model's V100 time).
//   - Philly pre-processed CSV (timestamp,duration,num_gpus,gpu_time,cluster;
//     timestamps "YYYY-MM-DD HH:MM:SS" UTC): no job ids, users or models;
//     each job gets a model from a fixed list of common catalog models by a
//     PCG generator seeded with (Options.Seed, row), IterTime = that model's
//     V100 time (0.1 s without V100 data), Iters = duration / IterTime.
//   - Philly raw cluster_job_log JSON, streamed one job at a time: GPUs =
//     the GPUs of the first attempt; duration = the sum of end − start over
//     the attempts that have both (failed attempts included: their work was
//     done and redone); a model assigned from (Seed, job index).
//   - Gavel .trace (tab-separated, no header; the 10-field layout of Gavel's
//     scheduler/utils.py parse_trace, and the 7, 9 and 11-field variants):
//     the job type maps to a catalog model by model.GavelName, GPUs =
//     scale_factor, IterTime = 1 / (V100 steps/s at scale 1), Iters =
//     total_steps / scale_factor.
//
// # Errors and warnings
//
// Malformed input (unparsable, negative, NaN or infinite numbers, zero or
// negative GPU counts, missing columns, empty input, wrong field counts,
// duplicate ids) is an error, a *ParseError naming the file, the line (or,
// for JSON, the job index and byte offset) and the field. A job that is
// well-formed but unusable is skipped and counted in Warnings by reason:
// zero duration or steps; Philly JSON jobs with no attempts, no complete
// attempt, an attempt that ends before it starts, or no GPUs; Gavel job
// types the catalog lacks and 7-field lines with scale factor 0. Readers
// never panic (they are fuzzed).
package trace
