package arena

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestPlan(t *testing.T) {
	b := cluster.NewBuilder("t", nil)
	b.Add(cluster.ServerGroup{Type: "V100", Count: 2, GPUs: 4, Domain: 0})
	b.Add(cluster.ServerGroup{Type: "K80", Count: 1, GPUs: 4, Domain: 1})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	jobs := []*cluster.JobSpec{
		{Name: "B", User: "Team_A", GPUs: 8, Submit: 120, Iters: 10, IterTime: 1},
		{Name: "a/1", User: "team-a", GPUs: 6, Submit: 100, Iters: 10, IterTime: 1},
		{Name: "b", User: "team-b", GPUs: 1, Submit: 100, Iters: 10, IterTime: 1},
	}
	p, err := NewPlan(c, jobs)
	if err != nil {
		t.Fatal(err)
	}
	// by submission, ties in trace order; times from the first submission
	want := []struct {
		key        string
		pods, gpus int
		submit     float64
	}{{"u-team-a-2/j-a-1", 2, 3, 0}, {"u-team-b/j-b-2", 1, 1, 0}, {"u-team-a/j-b", 2, 4, 20}}
	for i, w := range want {
		j := p.Jobs[i]
		if j.Key() != w.key || j.Pods != w.pods || j.PodGPUs != w.gpus || j.Submit != w.submit {
			t.Errorf("job %d: %s %d×%d at %v, want %s %d×%d at %v", i, j.Key(), j.Pods, j.PodGPUs, j.Submit, w.key, w.pods, w.gpus, w.submit)
		}
	}
	if len(p.Nodes) != 3 || p.Nodes[2].Labels[labelGPUType] != "K80" || p.Nodes[2].Labels[labelDomain] != "1" || p.Capacity() != 12 {
		t.Errorf("nodes %+v", p.Nodes)
	}
	for _, bad := range []*cluster.JobSpec{
		{Name: "big", GPUs: 13, Iters: 1, IterTime: 1},
		{Name: "none", GPUs: 0, Iters: 1, IterTime: 1},
		{Name: "nowork", GPUs: 1},
	} {
		if _, err := NewPlan(c, []*cluster.JobSpec{bad}); err == nil {
			t.Errorf("job %s: no error", bad.Name)
		}
	}
	if got := podGPUs(7, 4); got != 1 {
		t.Errorf("podGPUs(7, 4) = %d, want 1", got)
	}
}

func TestTrackerCheckpoints(t *testing.T) {
	// 100 mini-batches of 1 s, 10 s start-up, 5 s to read a checkpoint;
	// stopped 60 s after all its pods ran: 50 s of progress
	for _, tc := range []struct {
		ck         Checkpoints
		kept, lost float64
	}{
		{Checkpoints{}, 0, 50},
		{Checkpoints{Every: 20}, 40, 10},
		{Checkpoints{Every: 20, OnTerm: true}, 50, 0},
		{Checkpoints{OnTerm: true}, 50, 0},
	} {
		tr := NewTracker(tc.ck)
		tr.Add("j", 100, 2)
		if oh := tr.Start("j", 100, 1, 10, 5); oh != 10 {
			t.Errorf("%+v: overhead %v, want 10 (no checkpoint to read)", tc.ck, oh)
		}
		if d := tr.Due(159, []string{"j"}); len(d) != 0 {
			t.Errorf("%+v: due early", tc.ck)
		}
		lost := tr.Stop("j", 160)
		if !near(tr.Kept("j"), tc.kept) || !near(lost, tc.lost) || !near(tr.LostGPUSeconds("j"), 2*tc.lost) || tr.Stops("j") != 1 {
			t.Errorf("%+v: kept %v lost %v (%v GPU-s), want %v, %v", tc.ck, tr.Kept("j"), lost, tr.LostGPUSeconds("j"), tc.kept, tc.lost)
		}
		// resumed: start-up, the checkpoint read if one was kept, then the rest
		oh := tr.Start("j", 200, 1, 10, 5)
		wantOH := 10.0
		if tc.kept > 0 {
			wantOH = 15
		}
		end := 200 + wantOH + (100 - tc.kept)
		if oh != wantOH {
			t.Errorf("%+v: resumed with overhead %v, want %v", tc.ck, oh, wantOH)
		}
		if d := tr.Due(end-1e-6, []string{"j"}); len(d) != 0 {
			t.Errorf("%+v: due before %v", tc.ck, end)
		}
		if d := tr.Due(end, []string{"j"}); len(d) != 1 || !tr.Finishing("j") {
			t.Errorf("%+v: not due at %v", tc.ck, end)
		}
		// its pods end: nothing lost, all kept
		if lost := tr.Stop("j", end+1); lost != 0 || tr.Kept("j") != 100 || tr.Stops("j") != 1 {
			t.Errorf("%+v: the end lost %v, kept %v, stops %d", tc.ck, lost, tr.Kept("j"), tr.Stops("j"))
		}
		tr.Done("j", end+1)
		if tr.Start("j", end+2, 1, 10, 5) != 0 {
			t.Errorf("%+v: a done job started again", tc.ck)
		}
		// 2 GPUs with all pods running 100-160 and 200 to end+1, lost
		// progress included
		if got, want := tr.RanGPUSeconds("j", end+50), 2*(60+end+1-200); !near(got, want) {
			t.Errorf("%+v: ran %v GPU-s, want %v", tc.ck, got, want)
		}
	}
}

// A segment not yet ended counts up to the time asked.
func TestTrackerRanWhileRunning(t *testing.T) {
	tr := NewTracker(Checkpoints{})
	tr.Add("j", 1000, 4)
	if tr.RanGPUSeconds("j", 50) != 0 {
		t.Error("ran before its pods ran")
	}
	tr.Start("j", 10, 1, 5, 0)
	if got := tr.RanGPUSeconds("j", 30); !near(got, 80) {
		t.Errorf("ran %v GPU-s by 30, want 80", got)
	}
}

// A stop during the start-up makes no progress and loses none.
func TestTrackerStopInStartup(t *testing.T) {
	tr := NewTracker(Checkpoints{})
	tr.Add("j", 10, 1)
	tr.Start("j", 0, 1, 10, 0)
	if lost := tr.Stop("j", 5); lost != 0 || tr.Kept("j") != 0 || tr.Stops("j") != 1 {
		t.Errorf("lost %v kept %v", lost, tr.Kept("j"))
	}
}

func TestSummarize(t *testing.T) {
	// 4 GPUs; a (2 GPUs) runs 0-10 and b (4 GPUs, submitted at 0) runs
	// 10-20 while c (2 GPUs, another namespace, submitted at 5) waits and
	// runs 20-30
	r := &Record{Capacity: 4, End: 30, Jobs: []JobSeen{
		{Key: "x/a", Namespace: "x", GPUs: 2, Submit: 0, FirstBind: 0, Completed: 10},
		{Key: "x/b", Namespace: "x", GPUs: 4, Submit: 0, FirstBind: 10, Completed: 20, Preemptions: 1, LostGPUSeconds: 3600},
		{Key: "y/c", Namespace: "y", GPUs: 2, Submit: 5, FirstBind: 20, Completed: 30},
	}, Holds: []Hold{{"x", 2, 0, 10}, {"x", 4, 10, 20}, {"y", 2, 20, 30}}}
	s := Summarize(r)
	if s.Finished != 3 || !near(s.AvgJCT, (10+20+25)/3.0) || s.P50JCT != 20 || s.P95JCT != 25 || s.Makespan != 30 {
		t.Errorf("JCTs %+v", s)
	}
	if !near(s.GPUUtil, (20+40+20)/120.0) || len(s.Util) != 10 || !near(s.Util[0], 0.5) || !near(s.Util[5], 1) {
		t.Errorf("utilisation %v %v", s.GPUUtil, s.Util)
	}
	if s.RunUtil != 0 {
		t.Errorf("run utilisation %v from a record without ran GPU-seconds", s.RunUtil)
	}
	if s.Preemptions != 1 || s.LostGPUHours != 1 || !near(s.AvgFirstBind, 25/3.0) {
		t.Errorf("preemptions %d lost %v first bind %v", s.Preemptions, s.LostGPUHours, s.AvgFirstBind)
	}
	// entitlements: 0-5 x alone wants 6 of 4: 4; 5-10 x 6, y 2: 2 and 2;
	// 10-20 x wants 4, y 2: 2 and 2; 20-30 y alone: 2 (x done)
	// x: 20+10+20 = 50 held 60; y: 10+20+20 = 50 held 20
	if len(s.Shares) != 2 || !near(s.Shares[0].EntitledSec, 50) || !near(s.Shares[0].HeldGPUSec, 60) ||
		!near(s.Shares[1].EntitledSec, 50) || !near(s.Shares[1].HeldGPUSec, 20) {
		t.Fatalf("shares %+v", s.Shares)
	}
	rx, ry := 60/50.0, 20/50.0
	if want := (rx + ry) * (rx + ry) / (2 * (rx*rx + ry*ry)); !near(s.Jain, want) {
		t.Errorf("Jain %v, want %v", s.Jain, want)
	}
	// b's gang ran whole only from 14 (a pod waited 10-14 holding 2 of
	// its GPUs): held counts it, run utilisation does not
	r.Jobs[0].RanGPUSeconds, r.Jobs[1].RanGPUSeconds, r.Jobs[2].RanGPUSeconds = 20, 24, 20
	if s := Summarize(r); !near(s.RunUtil, 64/120.0) || !near(s.GPUUtil, 80/120.0) {
		t.Errorf("run utilisation %v (held %v), want %v", s.RunUtil, s.GPUUtil, 64/120.0)
	}
	// an unfinished job: the makespan runs to End
	r.Jobs[2].Completed = -1
	r.Holds[2].To = -1
	if s := Summarize(r); s.Finished != 2 || s.Makespan != 30 || !near(s.GPUUtil, 80/120.0) {
		t.Errorf("unfinished: %+v", s)
	}
}

// fairShares against a brute-force statement of max-min fairness: nobody
// gets more than it asks; the capacity (or every demand) is used up; and
// no one who got less than it asked got less than anyone else.
func TestFairSharesMaxMin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		n := 1 + rng.IntN(6)
		names := []string{"a", "b", "c", "d", "e", "f"}[:n]
		demand := map[string]int{}
		total := 0
		for _, ns := range names {
			demand[ns] = rng.IntN(10)
			total += demand[ns]
		}
		capacity := float64(1 + rng.IntN(30))
		got := fairShares(demand, capacity, names)
		sum := 0.0
		for _, ns := range names {
			g := got[ns]
			sum += g
			if g > float64(demand[ns])+1e-9 || g < -1e-9 {
				t.Fatalf("%v cap %v: %s got %v", demand, capacity, ns, g)
			}
		}
		if !near(sum, math.Min(capacity, float64(total))) {
			t.Fatalf("%v cap %v: %v given", demand, capacity, sum)
		}
		for _, a := range names {
			if got[a] < float64(demand[a])-1e-9 {
				for _, b := range names {
					if got[b] > got[a]+1e-9 {
						t.Fatalf("%v cap %v: %s short at %v while %s has %v", demand, capacity, a, got[a], b, got[b])
					}
				}
			}
		}
	}
}

func TestParseSchedulers(t *testing.T) {
	s, err := ParseSchedulers("gandiva:gandiva-fair:quantum=60, kube-scheduler,gandiva")
	if err != nil || len(s) != 3 || s[0].String() != "gandiva:gandiva-fair:quantum=60" || s[1].String() != "kube-scheduler" || s[2].Policy != "tiresias-l" {
		t.Fatalf("%v %v", s, err)
	}
	s, err = ParseSchedulers("gandiva:tiresias-l:limits=10/20@tiresias-l")
	if err != nil || s[0].Policy != "tiresias-l:limits=10/20" || s[0].SimPolicy != "tiresias-l" || s[0].String() != "gandiva:tiresias-l:limits=10/20@tiresias-l" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"", "nosuch-scheduler", "gandiva:nosuch", "kube-scheduler:fifo", "kube-scheduler@fifo", "gandiva:fifo@nosuch"} {
		if _, err := ParseSchedulers(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
