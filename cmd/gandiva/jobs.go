package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/plural"
	"github.com/gandiva-sched/gandiva/internal/server"
	"github.com/gandiva-sched/gandiva/internal/visible"
)

// The client commands: submit, jobs, status, logs, cancel, explain, nodes, set, token.

type clientFlags struct {
	server, token, tokenFile string
	json                     bool
}

func (f *clientFlags) add(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.server, "server", envOr("GANDIVA_SERVER", defaultServer), "the server's URL ($GANDIVA_SERVER)")
	fl.StringVar(&f.token, "token", "", "your API token (else --token-file, $GANDIVA_TOKEN, ~/.gandiva/token, then the local admin token)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding your API token")
	fl.BoolVar(&f.json, "json", false, "print JSON")
}

func (f *clientFlags) client() (*api.Client, error) {
	// In order: --token, --token-file, $GANDIVA_TOKEN, ~/.gandiva/token,
	// the local server's admin token.
	tok := f.token
	if tok == "" && f.tokenFile != "" {
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok = strings.TrimSpace(string(data))
	}
	if tok == "" {
		tok = os.Getenv("GANDIVA_TOKEN")
	}
	home, _ := os.UserHomeDir()
	for _, p := range []string{filepath.Join(home, ".gandiva", "token"), filepath.Join(defaultDataDir(), "admin.token")} {
		if tok != "" {
			break
		}
		if data, err := os.ReadFile(p); err == nil {
			tok = strings.TrimSpace(string(data))
		}
	}
	if tok == "" {
		return nil, errors.New("no token: pass --token, set $GANDIVA_TOKEN, or put it in ~/.gandiva/token (an admin makes one with `gandiva token create --user NAME`)")
	}
	return api.NewClient(f.server, tok), nil
}

// printJSON prints v as indented JSON, with every control, bidirectional
// or other invisible format character in its strings written as a JSON
// escape (visible.JSON): the same value, shown inertly on a terminal.
func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(visible.JSON(buf.Bytes()))
	return err
}

// The commands below print every string that a user, a job or a node
// controls (names, commands, work directories, node names, GPU types,
// reasons that quote them) through visible.String, so that none can rewrite
// the terminal of whoever lists it, reorder the text around it or break a
// table's columns (docs/SECURITY.md).

// workersText is api.WorkersText, shown (node names come from nodes).
func workersText(ws []api.Worker) string { return visible.String(api.WorkersText(ws)) }

// addClientCmds adds the client commands to root.
func clientCmds() []*cobra.Command {
	f := &clientFlags{}
	jobs, status, explain := newJobsCmd(f), newStatusCmd(f), newExplainCmd(f)
	addKube(f, jobs, status, explain)
	cmds := []*cobra.Command{newSubmitCmd(f), jobs, status, newLogsCmd(f), newCancelCmd(f),
		explain, newNodesCmd(f), newSetCmd(f), newTokenCmd(f)}
	for _, c := range cmds {
		f.add(c)
	}
	return cmds
}

// ReadJobSpec reads a YAML (or JSON) job spec, strictly: unknown fields
// are errors that name them.
func readJobSpec(data []byte, name string) (*api.JobRequest, error) {
	var r api.JobRequest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("job spec %s: empty", name)
		}
		return nil, fmt.Errorf("job spec %s: %w", name, err)
	}
	return &r, nil
}

func newSubmitCmd(f *clientFlags) *cobra.Command {
	var (
		file, name, group, workdir string
		idemKey                    string
		gpus, minG, maxG, prio     int
		mem, iters, iterTime, ckpt float64
		env                        []string
		noPreRun, rankPerGPU       bool
	)
	var jobAccount string // (submitcheck.go)
	cmd := &cobra.Command{
		Use:   "submit [flags] [-- COMMAND ARGS...]",
		Short: "Submit a job (a YAML spec with -f, or flags and a command)",
		Long: `Submit a job. The job is charged to the user of your token. Either give a YAML spec with -f
(fields: name, command, env, workdir, gpus, min_gpus, max_gpus, group, mem_gib, iters, iter_time,
priority, prerun, checkpoint_every, idempotency_key, rank_per_gpu), or flags and the command after --. Flags
override the spec. With --idempotency-key, submitting the same request again (a retry after a lost
answer, say) prints the job the first submission created instead of creating another.`,
		Example: `  gandiva submit --gpus 2 --name resnet -- python train.py --lr 0.1
  gandiva submit -f job.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			rq := &api.JobRequest{}
			if file != "" {
				data, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				if rq, err = readJobSpec(data, file); err != nil {
					return err
				}
			}
			fl := cmd.Flags()
			if len(args) > 0 {
				rq.Command = args
			}
			set := func(n string, apply func()) {
				if fl.Changed(n) {
					apply()
				}
			}
			set("name", func() { rq.Name = name })
			set("group", func() { rq.Group = group })
			set("workdir", func() { rq.WorkDir = workdir })
			set("gpus", func() { rq.GPUs = gpus })
			set("min-gpus", func() { rq.MinGPUs = minG })
			set("max-gpus", func() { rq.MaxGPUs = maxG })
			set("priority", func() { rq.Priority = prio })
			set("mem-gib", func() { rq.MemGiB = mem })
			set("iters", func() { rq.Iters = iters })
			set("iter-time", func() { rq.IterTime = iterTime })
			set("checkpoint-every", func() { rq.CheckpointEvery = &ckpt })
			set("idempotency-key", func() { rq.IdempotencyKey = idemKey })
			if noPreRun {
				no := false
				rq.PreRun = &no
			}
			if rankPerGPU {
				rq.RankPerGPU = true
			}
			if rq.GPUs == 0 && !fl.Changed("gpus") {
				rq.GPUs = 1
			}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--env %q: want KEY=VALUE", kv)
				}
				if rq.Env == nil {
					rq.Env = map[string]string{}
				}
				rq.Env[k] = v
			}
			if rq.WorkDir == "" && len(rq.Command) > 0 && !fl.Changed("workdir") && file == "" {
				if wd, err := os.Getwd(); err == nil {
					rq.WorkDir = wd // like a shell: run where it was submitted
				}
			}
			if err := checkSubmission(rq, fl.Changed, f.server); err != nil {
				return err
			}
			if err := checkJobAccess(cmd.Context(), rq, f.server, jobAccount, cmd.ErrOrStderr()); err != nil {
				return err
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			j, err := cl.Submit(cmd.Context(), rq)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), j)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", visible.String(j.ID))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", "YAML job spec")
	fl.StringVar(&name, "name", "", "a label for the job")
	fl.StringVar(&idemKey, "idempotency-key", "", "make a retry of this submission return the job the first one created (1-255 printable ASCII)")
	fl.StringVar(&group, "group", "", "multi-job group (hyper-parameter search)")
	fl.StringVar(&workdir, "workdir", "", "working directory on the nodes (default: where you submit, when a command is given)")
	fl.IntVar(&gpus, "gpus", 1, "GPUs (the gang size)")
	fl.IntVar(&minG, "min-gpus", 0, "elastic: fewest GPUs")
	fl.IntVar(&maxG, "max-gpus", 0, "elastic: most GPUs")
	fl.IntVar(&prio, "priority", 0, "priority among your own jobs")
	fl.Float64Var(&mem, "mem-gib", 0, "peak GPU memory per GPU, GiB (decides packing)")
	fl.Float64Var(&iters, "iters", 0, "total mini-batches, if known")
	fl.Float64Var(&iterTime, "iter-time", 0, "estimated seconds per mini-batch on a V100")
	fl.Float64Var(&ckpt, "checkpoint-every", 0, "seconds between periodic checkpoints (default: the server's)")
	fl.StringArrayVar(&env, "env", nil, "KEY=VALUE added to the job's environment (repeatable)")
	fl.BoolVar(&noPreRun, "no-prerun", false, "skip the pre-run of the first mini-batch on one GPU")
	fl.StringVar(&jobAccount, "job-account", "", "when the server is on this machine: the OS account jobs run as here, to check as it that it can\n"+
		"enter the workdir and run the command before submitting (default "+defaultJobAccount+" where it exists; none skips the check)")
	fl.BoolVar(&rankPerGPU, "rank-per-gpu", false, "run one process per GPU, each a rank with one device (torch.distributed DDP), not one per node")
	return cmd
}

// flagOf names the submit flag that sets a job request's field.
var flagOf = map[string]string{"gpus": "gpus", "min_gpus": "min-gpus", "max_gpus": "max-gpus", "priority": "priority",
	"mem_gib": "mem-gib", "iters": "iters", "iter_time": "iter-time", "checkpoint_every": "checkpoint-every",
	"name": "name", "group": "group", "workdir": "workdir", "idempotency_key": "idempotency-key"}

// checkSubmission checks a request before it is sent, as the server will
// (so that, among others, bytes that are not UTF-8 are refused here rather
// than replaced on the way): an error names the flag that set the bad field,
// or the field. When the server is on this machine (a loopback URL), the
// job runs here too, so a workdir that does not exist is refused now.
func checkSubmission(rq *api.JobRequest, changed func(string) bool, server string) error {
	if err := rq.Validate(); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			if fl, ok := flagOf[ae.Field]; ok && changed(fl) {
				return fmt.Errorf("--%s: %s", fl, strings.TrimPrefix(ae.Message, ae.Field+": "))
			}
		}
		return err
	}
	if rq.WorkDir != "" && isLoopback(server) {
		st, err := os.Stat(rq.WorkDir)
		switch {
		case err != nil:
			return fmt.Errorf("workdir %s: %w (the server is on this machine, so the job would run here; the agent never creates a job's workdir)", rq.WorkDir, err)
		case !st.IsDir():
			return fmt.Errorf("workdir %s: not a directory", rq.WorkDir)
		}
	}
	return nil
}

// isLoopback reports whether a server URL names this machine.
func isLoopback(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

// seen shows when a node was last heard from: "12s ago", or "-" when not
// since the server started.
func seen(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return ago(t) + " ago"
}

func newJobsCmd(f *clientFlags) *cobra.Command {
	var all bool
	var user string
	var states []string
	var etaDetail bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List your jobs (admins: --all)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			jobs, err := cl.List(cmd.Context(), api.ListOptions{All: all, User: user, States: states})
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), jobs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tUSER\tGPUS\tSTATE\tDONE\tWHERE\tSUBMITTED\tETA\tREASON")
			for _, j := range jobs {
				done := fmt.Sprintf("%.0f", j.Done)
				if j.Iters > 0 {
					done = fmt.Sprintf("%.0f/%.0f", j.Done, j.Iters)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s ago\t%s\t%s\n", visible.String(j.ID), visible.String(j.Name), visible.String(j.User), j.GPUs,
					visible.String(j.State), done, orDash(workersText(j.Workers)), ago(j.Submitted), etaText(j.ETA, time.Now()), visible.String(j.Reason))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), etaFootnote(jobs, etaDetail))
			return err
		},
	}
	cmd.Flags().BoolVar(&etaDetail, "eta-detail", false, "say what each job's ETA rests on (its length, declared or drawn from which prior)")
	cmd.Flags().BoolVar(&all, "all", false, "every user's jobs (admins)")
	cmd.Flags().StringVar(&user, "user", "", "one user's jobs (admins)")
	cmd.Flags().StringSliceVar(&states, "state", nil, "only jobs in these states")
	return cmd
}

// etaText is a job's ETA for the command line: "starts ~14:05 (in 3m0s),
// ends ~15:20 (in 1h18m0s)"; "-" when there is none. A forecast over
// several draws of unknown lengths is a median with its 80% band:
// "ends ~15:20 (in 1h18m0s; 80%: 14:10–21:40)", "…" for a band open
// beyond the forecast's reach.
func etaText(e *api.ETA, now time.Time) string {
	if e == nil || (e.Start == nil && e.Finish == nil) {
		return "-"
	}
	at := func(t time.Time, lo, hi *time.Time) string {
		d := t.Sub(now).Round(time.Second)
		band := ""
		if e.Samples > 1 {
			clock := func(t *time.Time) string {
				if t == nil {
					return "…"
				}
				return t.Local().Format("15:04")
			}
			band = fmt.Sprintf("; 80%%: %s–%s", clock(lo), clock(hi))
		}
		if d <= 0 {
			return "~" + t.Local().Format("15:04") + " (now" + band + ")"
		}
		return fmt.Sprintf("~%s (in %s%s)", t.Local().Format("15:04"), d, band)
	}
	var parts []string
	if e.Start != nil {
		parts = append(parts, "starts "+at(*e.Start, e.StartLow, e.StartHigh))
	}
	if e.Finish != nil {
		parts = append(parts, "ends "+at(*e.Finish, e.FinishLow, e.FinishHigh))
	} else {
		parts = append(parts, "end not forecast")
	}
	return strings.Join(parts, ", ")
}

// etaFootnote explains, under a listing, the ETAs that are bands (empty
// when none is) or, with detail, what each job's ETA rests on.
func etaFootnote(jobs []api.Job, detail bool) string {
	var b strings.Builder
	bands := false
	for _, j := range jobs {
		if j.ETA == nil {
			continue
		}
		bands = bands || j.ETA.Samples > 1
		if detail {
			fmt.Fprintf(&b, "ETA of %s: %s (forecast from the state at %s)\n", visible.String(j.ID), visible.String(j.ETA.Note),
				j.ETA.Forecast.Local().Format("15:04:05"))
		}
	}
	if bands && !detail {
		b.WriteString("ETAs with \"80%\" are medians, with the band from the 10th to the 90th percentile, of forecasts that draw the lengths not declared (--iters) from a run-time distribution; --eta-detail or `gandiva explain JOB` says which.\n")
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// startUpLine describes a job's start-up for status: in progress, last
// measured, and whether its process is warm.
func startUpLine(j *api.Job) string {
	var parts []string
	if j.Starting != "" {
		parts = append(parts, visible.String(j.Starting))
	}
	if j.StartUp > 0 {
		parts = append(parts, fmt.Sprintf("last one took %.1f s", j.StartUp))
	}
	if j.Warm {
		parts = append(parts, "warm: its process was started ahead of its turn and is held at its first mini-batch boundary")
	}
	return strings.Join(parts, "; ")
}

func newStatusCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status JOB",
		Short: "Show one job: its state, where it runs, its progress and history",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			j, err := cl.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), j)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s (%s) of %s: %s", visible.String(j.ID), visible.String(j.Name), visible.String(j.User), visible.String(j.State))
			if j.Reason != "" {
				fmt.Fprintf(w, " — %s", visible.String(j.Reason))
			}
			argv := make([]string, len(j.Command))
			for i, a := range j.Command {
				argv[i] = visible.String(a)
			}
			if j.Summary {
				fmt.Fprintf(w, "\n  command:   (not kept: the job ended long enough ago that the server keeps only its summary; settings retain/*)")
			} else {
				fmt.Fprintf(w, "\n  command:   %s", strings.Join(argv, " "))
			}
			if j.WorkDir != "" {
				fmt.Fprintf(w, "\n  workdir:   %s", visible.String(j.WorkDir))
			}
			fmt.Fprintf(w, "\n  gpus:      %d", j.GPUs)
			if j.MinGPUs > 0 || j.MaxGPUs > 0 {
				fmt.Fprintf(w, " (elastic %d..%d)", j.MinGPUs, j.MaxGPUs)
			}
			fmt.Fprintf(w, "\n  progress:  %.0f mini-batches", j.Done)
			if j.IterTime > 0 {
				fmt.Fprintf(w, ", %.3f s each", j.IterTime)
			}
			if j.Metric != nil {
				fmt.Fprintf(w, ", metric %.4g", *j.Metric)
			}
			fmt.Fprintf(w, "\n  where:     %s\n", orDash(workersText(j.Workers)))
			if j.PreRun != "" {
				fmt.Fprintf(w, "  pre-run:   %s\n", visible.String(j.PreRun))
			}
			if line := startUpLine(j); line != "" {
				fmt.Fprintf(w, "  start-up:  %s\n", line)
			}
			fmt.Fprintf(w, "  counts:    %s, %s, %s, %s, %s\n", plural.Of(j.Attempts, "attempt"), plural.Of(j.Suspends, "suspend"),
				plural.Of(j.Resumes, "resume"), plural.Of(j.Migrations, "migration"), plural.Of(j.Packs, "pack"))
			printAttempts(w, j)
			for _, n := range j.Notes {
				fmt.Fprintf(w, "  note:      %s\n", visible.String(n))
			}
			fmt.Fprintln(w, "  history:")
			for _, h := range j.History {
				from := h.From
				if from == "" {
					from = "·"
				}
				fmt.Fprintf(w, "    %s  %s → %s", h.At.Local().Format("15:04:05.000"), visible.String(from), visible.String(h.To))
				if h.Reason != "" {
					fmt.Fprintf(w, "  (%s)", visible.String(h.Reason))
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
}

func newLogsCmd(f *clientFlags) *cobra.Command {
	var o api.LogOptions
	var raw bool
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a job's output (its latest attempt, rank 0, unless told otherwise)",
		Long: `Print a job's output (its latest attempt, rank 0, unless told otherwise). To a terminal, the
control characters in it (escape sequences, carriage returns, ...) and Unicode's bidirectional and
other invisible format characters are shown escaped (\x1b, \r, \u202e), lines and tabs kept, so
that a job's output cannot rewrite your terminal; --raw prints its bytes as they are, as does
printing to a file or a pipe.

Each start of a job's processes is an attempt (its first start, a restart after a failure, a
migration, a resume elsewhere, its pre-run), numbered 1, 2, ... as gandiva status lists them,
with where each ran and how it ended; --attempt N prints attempt N's output. -f follows the job
across its attempts and nodes until it ends, a line "==> JOB attempt N on NODE GPUs ... <=="
on stderr before each attempt's output.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := firstErr(intAtLeast("--attempt", o.Attempt, 0), intAtLeast("--rank", o.Rank, 0), intAtLeast("--tail", o.Tail, 0)); err != nil {
				return err
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !raw && isTerminal(out) {
				vw := &visible.Writer{W: out}
				defer vw.Flush()
				out = vw
			}
			if o.Follow && o.Attempt == 0 {
				err := followLogs(cmd.Context(), cl, args[0], o, out, cmd.ErrOrStderr())
				if cmd.Context().Err() != nil {
					return nil
				}
				return err
			}
			rc, err := cl.Logs(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(out, rc)
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "print the job's bytes as they are, also to a terminal")
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "keep printing until the job ends, across its attempts and nodes (a header line on stderr for each); with --attempt, until that attempt ends")
	cmd.Flags().Int64Var(&o.Attempt, "attempt", 0, "attempt N (1, 2, ...: gandiva status JOB lists them; 0: the latest)")
	cmd.Flags().IntVar(&o.Rank, "rank", 0, "a worker of a multi-node gang")
	cmd.Flags().Int64Var(&o.Tail, "tail", 0, "only the last N bytes")
	return cmd
}

func newCancelCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB...",
		Short: "Cancel jobs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				j, err := cl.Cancel(cmd.Context(), id)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", visible.String(j.ID), visible.String(j.State))
			}
			return errors.Join(errs...)
		},
	}
}

func newExplainCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "explain JOB",
		Short: "Why a job is pending: its place in the queue and the reasons per server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			e, err := cl.Explain(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), e)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s: %s\n", visible.String(e.Job), visible.String(e.Summary))
			if e.Queue != "" {
				fmt.Fprintf(w, "  queue:    %s\n", visible.String(e.Queue))
			}
			if e.Position > 0 {
				fmt.Fprintf(w, "  position: place %d of %d waiting in policy %s's order; %s ahead %s for %s", e.Position, e.Waiting, visible.String(e.Policy),
					plural.Of(e.Position-1, "job"), plural.Noun(e.Position-1, "asks|ask"), plural.Of(e.AheadGPUs, "GPU"))
				if len(e.Ahead) > 0 {
					ahead := make([]string, len(e.Ahead))
					for i, a := range e.Ahead {
						ahead[i] = visible.String(a)
					}
					fmt.Fprintf(w, " (%s", strings.Join(ahead, ", "))
					if len(e.Ahead) < e.Position-1 {
						fmt.Fprintf(w, ", …")
					}
					fmt.Fprint(w, ")")
				}
				fmt.Fprintln(w)
			}
			if e.BackoffUntil != nil {
				fmt.Fprintf(w, "  back-off: until %s\n", e.BackoffUntil.Local().Format("15:04:05"))
			}
			if e.PreRun != "" {
				fmt.Fprintf(w, "  pre-run:  %s\n", visible.String(e.PreRun))
			}
			if e.ETA != nil {
				fmt.Fprintf(w, "  ETA:      %s (%s; forecast from the state at %s)\n", etaText(e.ETA, time.Now()), visible.String(e.ETA.Note), e.ETA.Forecast.Local().Format("15:04:05"))
			}
			fmt.Fprintf(w, "  GPUs:     %d free of %d\n", e.FreeGPUs, e.TotalGPUs)
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, s := range e.Servers {
				mark := "✗"
				if s.Fits {
					mark = "✓"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", mark, visible.String(s.Node), visible.String(s.Why))
			}
			return tw.Flush()
		},
	}
}

func newNodesCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the GPU nodes; drain, undrain or remove one (admins)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ns, err := cl.Nodes(cmd.Context())
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), ns)
			}
			sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tGPUS\tFREE\tSTATUS\tSEEN\tJOBS\tREASON")
			for _, n := range ns {
				st := "up"
				switch {
				case !n.Up:
					st = "down"
				case n.Drained:
					st = "drained"
				}
				jobs := visible.String(strings.Join(n.Jobs, ","))
				if n.OtherJobs > 0 {
					jobs = strings.TrimPrefix(jobs+fmt.Sprintf(",+%d others", n.OtherJobs), ",")
				}
				fmt.Fprintf(tw, "%s\t%d×%s\t%d\t%s\t%s\t%s\t%s\n", visible.String(n.Name), n.GPUs, visible.String(n.GPUType), n.FreeGPUs, st, seen(n.LastSeen), orDash(jobs), visible.String(n.Reason))
			}
			return tw.Flush()
		},
	}
	undrain := &cobra.Command{
		Use:   "undrain NODE",
		Short: "Return a node drained after repeated failures to service (admins)",
		Long: "Return a node to service. A node where 5 jobs failed for reasons other than their own code\n" +
			"within an hour is drained (blacklisted): no new work goes there until an admin undrains it.",
		Example: "  gandiva nodes undrain gpu07",
		Args:    cobra.ExactArgs(1),
		RunE:    onNode(f, (*api.Client).Undrain, "%s undrained"),
	}
	drain := &cobra.Command{
		Use:     "drain NODE",
		Short:   "Take a node out of service: no new work goes there, its jobs keep running (admins)",
		Example: "  gandiva nodes drain gpu07    # before maintenance; then gandiva nodes undrain gpu07",
		Args:    cobra.ExactArgs(1),
		RunE:    onNode(f, (*api.Client).Drain, "%s drained"),
	}
	remove := &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove a node: revoke its credential and requeue its jobs at once (admins)",
		Long: "Remove a node: its credential is revoked (its agent's next call is refused), it is declared down and\n" +
			"its jobs are requeued at once, to restart elsewhere from their last checkpoints. It stays listed, down.\n" +
			"To bring it back, delete the agent's credential file (WORK/node.credential) and start the agent:\n" +
			"it enrols again with the agent token.",
		Example: "  gandiva nodes remove gpu07",
		Args:    cobra.ExactArgs(1),
		RunE:    onNode(f, (*api.Client).RemoveNode, "%s removed: its credential is revoked and its jobs requeued"),
	}
	cmd.AddCommand(undrain, drain, remove) // (the client flags are the parent's, persistent)
	return cmd
}

// onNode is the RunE of a command that does call to the node named by its
// one argument and then prints done (a format of the node's name).
func onNode(f *clientFlags, call func(*api.Client, context.Context, string) error, done string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, err := f.client()
		if err != nil {
			return err
		}
		if err := call(cl, cmd.Context(), args[0]); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), done+"\n", visible.String(args[0]))
		return nil
	}
}

func newSetCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Change a run-time setting the policy reads (admins)",
		Long: "Change a run-time setting the server or its scheduling policy reads; it is logged, so it survives\n" +
			"restarts. A key nobody reads, or a value out of range, is refused.\n\n" +
			"The server reads per-user quotas (QUOTA for every user, QUOTA/USER for one):\n  " +
			strings.Join(server.ServerSettings(), "\n  ") + "\n" +
			"Under gandiva-fair, tickets/USER is a user's tickets (their share of the cluster's GPU throughput, 0 to 1e6).",
		Example: "  gandiva set tickets/alice 4\n  gandiva set quota/queued-jobs/bob 50",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			if err := cl.Set(cmd.Context(), api.Setting{Key: args[0], Value: args[1]}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s = %s\n", visible.String(args[0]), visible.String(args[1]))
			return nil
		},
	}
}

func newTokenCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens (admins)"}
	var user, label string
	var admin, agentTok bool
	var uses int
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token for a user (or an agent); the secret is shown once",
		Long: "Create a token for a user, or an agent (enrolment) token. An agent token only enrols nodes:\n" +
			"--label NODE binds it to one node name (without it, any name); it enrols --uses nodes (default 1)\n" +
			"within --ttl (default 24h), and `gandiva token revoke ID` ends it at once. Give each new node its\n" +
			"own: gandiva agent --token-file FILE uses it once and then keeps the node's credential.",
		Example: `  gandiva token create --user alice
  gandiva token create --agent --label node7
  gandiva token create --agent --uses 8 --ttl 2h    # 8 new nodes of any name, within 2 hours`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			if !agentTok && (cmd.Flags().Changed("uses") || cmd.Flags().Changed("ttl")) {
				return errors.New("--uses and --ttl are an agent token's limits: give --agent")
			}
			rq := api.TokenRequest{User: user, Admin: admin, Agent: agentTok, Label: label}
			if agentTok {
				rq.Uses, rq.TTL = uses, ttl.Seconds()
			}
			t, err := cl.CreateToken(cmd.Context(), rq)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), t)
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.Token)
			fmt.Fprintf(cmd.ErrOrStderr(), "token %s for %s (%s); give it to them: it is not shown again\n", visible.String(t.ID), visible.String(t.User), visible.String(t.Kind))
			if t.Uses > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "it enrols %s, until %s\n", plural.Of(t.Uses, "node"), t.Expires.Local().Format(time.DateTime))
			}
			return nil
		},
	}
	create.Flags().StringVar(&user, "user", "", "the user (created if new)")
	create.Flags().BoolVar(&admin, "admin", false, "make the user an administrator")
	create.Flags().BoolVar(&agentTok, "agent", false, "an agent token (it only enrols nodes) instead of a user token")
	create.Flags().StringVar(&label, "label", "", "an agent token: the one node it may enrol (default: any)")
	create.Flags().IntVar(&uses, "uses", 1, "an agent token: how many nodes it may enrol")
	create.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "an agent token: how long it may be used")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens: ID, user, kind, label, created, an agent token's uses left and expiry (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ts, err := cl.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), ts)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tUSER\tKIND\tLABEL\tCREATED\tUSES\tEXPIRES")
			for _, t := range ts {
				uses, expires := "-", "-"
				switch {
				case t.Unlimited:
					uses, expires = "unlimited", "never (revoke it)"
				case t.Kind == "agent":
					uses, expires = fmt.Sprint(t.Uses), t.Expires.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visible.String(t.ID), visible.String(t.User), visible.String(t.Kind), orDash(visible.String(t.Label)), t.Created.Local().Format(time.DateTime), uses, expires)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke ID...",
		Short:   "Revoke tokens by ID (or a unique prefix of at least 6 hex digits); they stop working at once",
		Example: "  gandiva token list\n  gandiva token revoke 3fa2c1",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				t, err := cl.RevokeToken(cmd.Context(), id)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s, %s)\n", visible.String(t.ID), visible.String(t.User), visible.String(t.Kind))
			}
			return errors.Join(errs...)
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
