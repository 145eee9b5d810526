package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gandiva-sched/gandiva/internal/api"
	"github.com/gandiva-sched/gandiva/internal/server"
	"github.com/gandiva-sched/gandiva/internal/timeline"
	"github.com/gandiva-sched/gandiva/internal/ui"
	"github.com/gandiva-sched/gandiva/internal/ui/uitest"
)

// span is a time interval in engine seconds.
type span struct{ Start, End float64 }

// merge sorts spans, drops those shorter than a millisecond and joins
// those that touch or overlap (within eps).
func merge(in []span) []span {
	slices.SortFunc(in, func(a, b span) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	var out []span
	for _, s := range in {
		if s.End-s.Start < 1e-3 {
			continue // sub-millisecond: a change and its reversal in one step (the page does not draw them)
		}
		if n := len(out); n > 0 && s.Start <= out[n-1].End+1e-6 {
			out[n-1].End = math.Max(out[n-1].End, s.End)
			continue
		}
		out = append(out, s)
	}
	return out
}

// historySpans are the intervals job j was in one of states, from the
// server's recorded history (wall-clock times less epoch), cut at now.
func historySpans(j *api.Job, epoch, now float64, states ...string) []span {
	var out []span
	open := -1.0
	for _, ch := range j.History {
		t := float64(ch.At.UnixNano())/1e9 - epoch
		if t > now {
			break
		}
		in := slices.Contains(states, ch.To)
		if in && open < 0 {
			open = t
		} else if !in && open >= 0 {
			out = append(out, span{open, t})
			open = -1
		}
	}
	if open >= 0 {
		out = append(out, span{open, now})
	}
	return merge(out)
}

type pageSeg struct {
	GPU   *int    `json:"gpu"`
	Kind  string  `json:"kind"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// pageSpans are the intervals in which the page's timeline shows job name
// on a GPU in one of kinds.
func pageSpans(segs []pageSeg, kinds ...string) []span {
	var out []span
	for _, s := range segs {
		if s.GPU != nil && slices.Contains(kinds, s.Kind) {
			out = append(out, span{s.Start, s.End})
		}
	}
	return merge(out)
}

func sameSpans(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i].Start-b[i].Start) > 1e-3 || math.Abs(a[i].End-b[i].End) > 1e-3 {
			return false
		}
	}
	return true
}

var dashboardLine = regexp.MustCompile(`dashboard: (http://[^/]+)/ui/#token=(\S+)`)

// TestDashboardOfTheDemo runs `gandiva up --demo` (the real server, agent
// and trainer processes on fake GPUs) with two more users' jobs beside the
// demo's, and checks its dashboard in Chromium while it runs: the page's
// GPU timeline shows each time-sliced job holding GPUs over exactly the
// intervals, and suspended (parked on its GPUs) over exactly the
// intervals, of the server's own history of the job's state changes; a
// user's page holds only their jobs, the GPUs others hold shown as taken.
// Once the demo has ended, `gandiva whatif` on its store prints the table
// of what happened beside the replays and writes their timelines as HTML,
// what happened being the timeline the store holds.
func TestDashboardOfTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo takes about a minute")
	}
	ctx := uitest.Browser(t, 5*time.Minute)
	dir := t.TempDir()
	up := exec.Command(bin, "up", "--demo", "--data-dir", dir)
	up.Stderr = os.Stderr
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var outMu sync.Mutex
	var out strings.Builder
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			outMu.Lock()
			out.WriteString(sc.Text() + "\n")
			outMu.Unlock()
			if m := dashboardLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
		exited <- up.Wait()
	}()
	t.Cleanup(func() {
		if up.ProcessState == nil {
			up.Process.Kill()
			<-exited
		}
	})
	var base, adminTok string
	select {
	case m := <-found:
		base, adminTok = m[1], m[2]
	case err := <-exited:
		t.Fatalf("gandiva up --demo exited before printing the dashboard's URL: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatal("gandiva up --demo printed no dashboard URL within 60 s")
	}
	bg := context.Background()
	admin := api.NewClient(base, adminTok)
	// A job is admitted only once a node could run it: wait for the demo's agent.
	waitNodes(t, admin, 1, time.Minute)
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		tc, err := admin.CreateToken(bg, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tc.Token
		work := t.TempDir()
		if _, err := api.NewClient(base, tc.Token).Submit(bg, &api.JobRequest{Name: u + "-job", GPUs: 1, MemGiB: 3, Iters: 80, IterTime: 0.1, WorkDir: work,
			Command: []string{bin, "trainer", "-steps", "80", "-step-time", "100ms", "-dim", "256", "-seed", "9", "-out", filepath.Join(work, "r.json")}}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(ctx context.Context, actions ...chromedp.Action) { t.Helper(); uitest.Run(t, ctx, actions...) }
	run(ctx, chromedp.Navigate(base+"/ui/#token="+adminTok))
	uitest.WaitReady(t, ctx)

	// Wait for a job the server has suspended and resumed.
	var sliced *api.Job
	deadline := time.Now().Add(2 * time.Minute)
	for sliced == nil && time.Now().Before(deadline) {
		jobs, err := admin.List(bg, api.ListOptions{All: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Suspends > 0 && j.Resumes > 0 {
				if sliced, err = admin.Get(bg, j.ID); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if sliced == nil {
		t.Fatalf("no job was suspended and resumed within 2 minutes:\n%s", out.String())
	}
	label := sliced.ID + " " + sliced.Name
	// The page polls: wait until it shows data at least as recent as the
	// history just read.
	last := sliced.History[len(sliced.History)-1].At
	var epoch float64
	uitest.Eval(t, ctx, `gandiva.state.summary.epoch`, &epoch)
	lastT := float64(last.UnixNano())/1e9 - epoch
	run(ctx, chromedp.Poll(fmt.Sprintf(`gandiva.state.data && gandiva.state.data.now >= %v && gandiva.main.segmentsOf(%q).length > 0`, lastT, label), nil,
		chromedp.WithPollingTimeout(30*time.Second)))
	// Compare at the page's now: everything the history holds up to then.
	var now float64
	var segs []pageSeg
	uitest.Eval(t, ctx, `gandiva.state.data.now`, &now)
	uitest.Eval(t, ctx, fmt.Sprintf(`gandiva.main.segmentsOf(%q)`, label), &segs)
	// The API's view of a job is published after the step that changed it,
	// the dashboard's timeline under the machine's lock: read the history
	// again until it has caught up with the page's now (or 10 s passed).
	shown := pageSpans(segs, "running", "packed", "migrating", "start-up")
	var held []span
	for caughtUp := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if sliced, err = admin.Get(bg, sliced.ID); err != nil {
			t.Fatal(err)
		}
		held = historySpans(sliced, epoch, now, "running", "migrating")
		if sameSpans(held, shown) || time.Now().After(caughtUp) {
			break
		}
	}
	if !sameSpans(held, shown) {
		t.Fatalf("%s: the page shows it holding GPUs over %v; the server's history over %v", label, shown, held)
	}
	suspended := historySpans(sliced, epoch, now, "suspended")
	parked := pageSpans(segs, "suspended")
	if len(suspended) == 0 || !sameSpans(suspended, parked) {
		t.Fatalf("%s: the page shows it suspended over %v; the server's history over %v", label, parked, suspended)
	}
	t.Logf("%s: held GPUs over %d intervals and was suspended over %d, in the page as in the server's history", label, len(held), len(suspended))

	// alice's page: her job, no one else's (by name or user), the GPUs
	// the others hold as another user's.
	alice := uitest.Tab(t, ctx)
	run(alice, chromedp.Navigate(base+"/ui/#token="+tokens["alice"]))
	uitest.WaitReady(t, alice)
	run(alice, chromedp.Poll(`gandiva.state.data.jobs.some((j) => j.name.endsWith(' alice-job'))`, nil, chromedp.WithPollingTimeout(30*time.Second)))
	var state, text string
	run(alice, chromedp.Evaluate(`JSON.stringify(gandiva.state)`, &state), chromedp.Evaluate(`document.body.innerText`, &text))
	for _, other := range []string{"bob", "train-", `"user":"admin"`} {
		if strings.Contains(state, other) || strings.Contains(text, other) {
			t.Errorf("alice's dashboard mentions %q", other)
		}
	}
	var users []string
	uitest.Eval(t, alice, `[...new Set(gandiva.state.data.jobs.map((j) => j.user))]`, &users)
	if !slices.Equal(users, []string{"alice"}) {
		t.Errorf("alice's timeline holds jobs of %v", users)
	}
	var anon int
	uitest.Eval(t, alice, `gandiva.main.rows.reduce((n, r) => n + r.segs.filter((s) => s.job < 0).length, 0)`, &anon)
	if anon == 0 {
		t.Error("alice's timeline shows no other user's segment: the GPUs they hold look free")
	}
	// the picture for the README: once a few jobs have ended
	for time.Now().Before(deadline) {
		jobs, err := admin.List(bg, api.ListOptions{All: true})
		if err != nil {
			break // the demo has ended
		}
		if countState(jobs, "finished") >= 4 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	run(ctx, chromedp.Evaluate(`gandiva.main.scale.fit()`, nil), chromedp.Sleep(200*time.Millisecond))
	uitest.Screenshot(t, ctx, filepath.Join("..", ".."), "dashboard-live.png")
	// (the pages would poll a server that is about to stop)
	run(alice, chromedp.Navigate("about:blank"))
	run(ctx, chromedp.Navigate("about:blank"))

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gandiva up --demo: %v\n%s", err, out.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the demo did not end within 3 minutes:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "every trainer finished once") {
		t.Fatalf("the demo did not pass:\n%s", out.String())
	}

	// gandiva whatif on the demo's store
	html := filepath.Join(t.TempDir(), "whatif.html")
	wi, err := exec.Command(bin, "whatif", "--data-dir", dir, "--policy", "gandiva:quantum=4;cooldown=20,fifo", "--startup", "1", "--html", html).CombinedOutput()
	if err != nil {
		t.Fatalf("gandiva whatif: %v\n%s", err, wi)
	}
	t.Logf("gandiva whatif:\n%s", wi)
	for _, row := range []string{"live: gandiva:cooldown=20;quantum=4", "what-if: gandiva:cooldown=20;quantum=4", "what-if: fifo"} {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(row) + `\s+10\s+`).Match(wi) {
			t.Errorf("the table has no row %q of 10 jobs", row)
		}
	}
	f, err := os.Open(html)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := ui.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.ReadHistory(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3 || mustJSON(t, rep.Runs[0].Timeline) != mustJSON(t, h.TimelineData(timeline.Query{})) {
		t.Fatalf("the report has %d runs; the first is not the store's timeline", len(rep.Runs))
	}
	// every row counts the same jobs as ended live (what never ended there
	// is unfinished in every replay too)
	for _, r := range rep.Runs[1:] {
		if r.Stats[0].Value != rep.Runs[0].Stats[0].Value || !strings.HasSuffix(r.Stats[0].Value, " of 10") || len(r.Timeline.Jobs) < 10 {
			t.Errorf("%s: %v (live: %v), %d jobs in its timeline", r.Label, r.Stats[0], rep.Runs[0].Stats[0], len(r.Timeline.Jobs))
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func countState(jobs []api.Job, state string) int {
	n := 0
	for _, j := range jobs {
		if j.State == state {
			n++
		}
	}
	return n
}
