package kube

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
	"github.com/gandiva-sched/gandiva/internal/sim"
)

// equivJob is one job of the equivalence workload: a Job of pods × gpus
// in namespace ns (the user it is charged to), created submit seconds
// into the run, that ends after run seconds of service.
type equivJob struct {
	ns, name    string
	pods, gpus  int
	submit, run float64
}

func (j equivJob) spec() *cluster.JobSpec {
	// what the scheduler submits for the Job (workload.go): name
	// NS/NAME, user NS, the gang's GPUs, iters × iter-time
	return &cluster.JobSpec{Name: j.ns + "/" + j.name, User: j.ns, GPUs: j.pods * j.gpus,
		Submit: j.submit, Iters: j.run, IterTime: 1}
}

// step is one change of a job's state as the executor shows it: start,
// suspend, resume, migrate or finish, at a time in seconds from the
// run's origin. A step seen by polling happened after the poll before
// the one that saw it began and by the time this one returned: in
// (after, at]; the simulator's steps have after == at.
type step struct {
	what      string
	at, after float64
}

// equivStep names the change of state from one engine state to the next
// (the states the sim's engine has after a round, the annotations the
// scheduler writes on a Job), or "".
func equivStep(from, to cluster.JobState, started bool) string {
	switch {
	case from == to:
		return ""
	case to == cluster.Running && from == cluster.Migrating:
		return "" // a migration ends: counted at its start
	case to.Holding() && !started:
		return "start"
	case to.Holding() && from.Waiting():
		// (a resumption elsewhere is Migrating until its state has
		// moved; the Job shows it running)
		return "resume"
	case to == cluster.Suspended:
		return "suspend"
	case to == cluster.Migrating:
		return "migrate"
	case to == cluster.Finished:
		return "finish"
	case to.Terminal():
		return "end:" + to.String()
	}
	return ""
}

// equivPerf is a performance model in which a job runs exactly its
// service on any GPUs and nothing costs anything (the simulator's
// compat model: no locality, no start-up, no checkpoint, no progress
// reports, as exclusive-mode jobs on Kubernetes report none).
func equivPerf() sim.PerfModel { return sim.CompatPerf() }

// simSteps runs the workload in the simulator under the policy (a
// registry name with parameters, as Options.Policy) on nodes × gpus
// reference GPUs, and returns each job's steps.
func simSteps(t *testing.T, pol string, settings map[string]string, nodes, gpus int, jobs []equivJob) map[string][]step {
	t.Helper()
	c := &cluster.Cluster{Name: "kubernetes"}
	for i := range nodes {
		if _, err := c.AddServer("gpu-"+strconv.Itoa(i), cluster.ReferenceGPU, gpus, "rack-0", 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	names, params, err := registry.Parse(pol)
	if err != nil {
		t.Fatal(err)
	}
	// the same configuration as the scheduler's (Options.newPolicy)
	p, err := registry.New(names[0], policy.Config{Params: params[0]})
	if err != nil {
		t.Fatal(err)
	}
	var specs []*cluster.JobSpec
	for _, j := range jobs {
		specs = append(specs, j.spec())
	}
	// the settings ConfigMap's entries, as the scheduler sends them
	// (syncSettings): "tickets.NS" is setting "tickets/NS", before any job
	var set []cluster.Event
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		kind, rest, _ := strings.Cut(k, ".")
		set = append(set, cluster.Event{Time: 0, Kind: cluster.EvSetting, Key: kind + "/" + rest, Value: settings[k]})
	}
	out := map[string][]step{}
	state := map[string]cluster.JobState{}
	started := map[string]bool{}
	fail := engine.FailurePolicy{MaxAttempts: 1} // as the scheduler's engine
	_, err = sim.Run(sim.Config{Cluster: c, Jobs: specs, Policy: p, Perf: equivPerf(), Engine: engine.Options{Failure: &fail}, Settings: set,
		Check: true,
		Observe: func(now float64, e *engine.Engine) {
			for _, j := range e.Jobs() {
				name := j.Spec.Name
				if w := equivStep(state[name], j.State, started[name]); w != "" {
					out[name] = append(out[name], step{w, now, now})
				}
				state[name] = j.State
				started[name] = started[name] || j.State.Holding()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func formatSteps(s []step) string {
	var b strings.Builder
	for i, x := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s@%.1f", x.what, x.at)
		if x.at-x.after >= 0.3 {
			// a poll that took long: seen only then
			fmt.Fprintf(&b, "(after %.1f)", x.after)
		}
	}
	return b.String()
}

// kjob is one job of the workload as the test drives and watches it on
// Kubernetes: the Job's state as the scheduler writes it (its annotation
// gandiva.io/state and spec.suspend), the service it has had, its steps.
type kjob struct {
	equivJob
	created  bool
	phase    string // "", running, suspended, moving, done
	where    string // its placement annotation, as last seen
	started  bool
	service  float64   // seconds of service before since
	since    time.Time // when the current run began (phase running)
	finished bool      // its pods were told to exit
	steps    []step
}

// phaseOf reads a Job's state as the scheduler last wrote it.
func phaseOf(j *batchv1.Job) string {
	if done, _, _ := jobFinished(j); done {
		return "done"
	}
	susp := j.Spec.Suspend != nil && *j.Spec.Suspend
	switch st := j.Annotations[AnnState]; {
	case st == StateRunning && !susp:
		return "running"
	case st == StateMoving:
		return "moving"
	case st == StateSuspended:
		return "suspended"
	}
	return ""
}

// kubeStep names a change of a Job's phase as equivStep names the
// engine's.
func kubeStep(from, to string, started bool) string {
	switch {
	case from == to:
		return ""
	case to == "running" && from == "moving":
		return ""
	case to == "running" && !started:
		return "start"
	case to == "running":
		return "resume"
	case to == "suspended":
		return "suspend"
	case to == "moving":
		return "migrate"
	case to == "done":
		return "finish"
	}
	return ""
}

// pollStep names the change of a Job seen between two polls, from phase
// and placement annotation to ph and where, as kubeStep does; a Job seen
// running on other nodes than at the poll before has moved although no
// poll saw it moving (the moving phase, old pods gone and new ones
// bound, can be shorter than a poll on an idle machine).
func pollStep(phase, was, ph, where string, started bool) string {
	if phase == "running" && ph == "running" && where != was {
		return "migrate"
	}
	return kubeStep(phase, ph, started)
}

// kubeRun creates the workload's Jobs at origin + their submit times and
// plays their pods: a job's pods exit (kwok's stages make them Succeeded)
// once it has had its run seconds of service, counted from when the
// Job shows it running to when it shows it suspended or moving (the
// engine's own grant, seen through the API). It polls every 50 ms and
// returns each job's steps, in seconds from origin, with the times at
// which they were seen and the times of the polls before, at which they
// had not been (a poll of a loaded machine can take a second or more:
// the step may have happened at any time in between).
func kubeRun(t *testing.T, cs kubernetes.Interface, origin time.Time, jobs []equivJob, timeout time.Duration) map[string][]step {
	t.Helper()
	ctx := context.Background()
	var ks []*kjob
	nss := map[string]bool{}
	for _, j := range jobs {
		ks = append(ks, &kjob{equivJob: j})
		nss[j.ns] = true
	}
	deadline := origin.Add(timeout)
	prev := 0.0 // when the last poll began
	for {
		now := time.Now()
		if now.After(deadline) {
			var b strings.Builder
			for _, k := range ks {
				fmt.Fprintf(&b, "\n  %s/%s: phase %q, service %.1f of %.1f s; %s", k.ns, k.name, k.phase, k.service, k.run, formatSteps(k.steps))
			}
			t.Fatalf("the workload did not end within %v of its start:%s", timeout, b.String())
		}
		at := now.Sub(origin).Seconds()
		for _, k := range ks {
			if !k.created && at >= k.submit {
				createJob(t, cs, jobSpec{ns: k.ns, name: k.name, pods: k.pods, gpus: k.gpus, preemptible: true, grace: 1,
					annotations: map[string]string{AnnIters: strconv.FormatFloat(k.run, 'f', -1, 64), AnnIterTime: "1"}})
				k.created = true
			}
		}
		began := time.Since(origin).Seconds()
		seen := map[string]*batchv1.Job{}
		for ns := range nss {
			l, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range l.Items {
				seen[ns+"/"+l.Items[i].Name] = &l.Items[i]
			}
		}
		now = time.Now()
		at = now.Sub(origin).Seconds()
		over := true
		for _, k := range ks {
			j := seen[k.ns+"/"+k.name]
			if j == nil {
				over = false
				continue
			}
			ph, where := phaseOf(j), j.Annotations[AnnPlacement]
			w := pollStep(k.phase, k.where, ph, where, k.started)
			k.where = where
			if w != "" {
				k.steps = append(k.steps, step{w, at, min(prev, at)})
			}
			if k.phase == "running" && ph != "running" {
				k.service += now.Sub(k.since).Seconds()
			}
			if ph == "running" && k.phase != "running" {
				k.since = now
				k.started = true
			}
			k.phase = ph
			if ph != "done" {
				over = false
			}
			if ph == "running" && !k.finished && k.service+now.Sub(k.since).Seconds() >= k.run {
				k.finished = finishRunning(t, cs, k.ns, k.name, k.pods)
			}
		}
		if over {
			break
		}
		prev = began
		time.Sleep(50 * time.Millisecond)
	}
	out := map[string][]step{}
	for _, k := range ks {
		out[k.ns+"/"+k.name] = k.steps
	}
	return out
}

// finishRunning tells a Job's pods to exit 0 once all pods of its gang
// are bound and running; it reports whether it did.
func finishRunning(t *testing.T, cs kubernetes.Interface, ns, job string, pods int) bool {
	t.Helper()
	bound, _, err := jobPods(cs, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(bound) != pods {
		return false
	}
	for _, p := range bound {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			return false
		}
	}
	for _, p := range bound {
		body := []byte(`{"metadata":{"annotations":{"` + kubetest.AnnExit + `":"0"}}}`)
		if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return true
}

// apiDelays measures the API path's delays on this plane, with gandiva
// (quantum 6 s, no packing) and three probe Jobs of all the GPUs in
// namespace ns, twice each, and returns the largest of each: wake, from a
// quantum boundary (a multiple of the quantum on the Unix clock) to the
// job it suspends seen suspended and the one it starts seen running (the
// scheduler's timer, a round, the pods' DisruptionTarget conditions and
// the Jobs' patches, the test's poll); finish, from a running job's pods
// told to exit to the next job seen running (the pods' end through kwok,
// the Job controller and the informers to the engine, a round, a patch,
// the test's poll). The probes are deleted before it returns.
func apiDelays(t *testing.T, p *cplane.Plane, cs kubernetes.Interface, ns string, pods, gpus int) (wake, finish float64) {
	t.Helper()
	const q = 6
	ctx := context.Background()
	g := runGandiva(t, p, Options{Policy: "gandiva:quantum=" + strconv.Itoa(q) + ";pack=false"})
	defer g.stop()
	kubetest.Namespace(t, cs, ns)
	for _, n := range []string{"p0", "p1", "p2"} {
		createJob(t, cs, jobSpec{ns: ns, name: n, pods: pods, gpus: gpus, preemptible: true, grace: 1})
	}
	// running returns a probe other than not that the Jobs show running
	running := func(not string) (string, map[string]string, error) {
		l, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, err
		}
		phases, run := map[string]string{}, ""
		for i := range l.Items {
			j := &l.Items[i]
			phases[j.Name] = phaseOf(j)
			if phases[j.Name] == "running" && j.Name != not {
				run = j.Name
			}
		}
		return run, phases, nil
	}
	var cur string
	kubetest.Eventually(t, 60*time.Second, "a probe running", func() (bool, error) {
		r, _, err := running("")
		cur = r
		return r != "", err
	})
	for range 2 {
		// the next boundary: cur suspended, another probe running
		var next string
		kubetest.Eventually(t, 60*time.Second, "a quantum boundary suspending probe "+cur, func() (bool, error) {
			r, phases, err := running(cur)
			next = r
			return phases[cur] == "suspended" && r != "", err
		})
		seen := time.Now()
		at := seen.Sub(time.Unix(seen.Unix()/q*q, 0))
		t.Logf("API delay: the boundary's suspension of %s and start of %s seen %v after it", cur, next, at.Round(time.Millisecond))
		wake = max(wake, at.Seconds())
		// next ends (before the next boundary: the quantum is 6 s)
		kubetest.Eventually(t, 60*time.Second, "probe "+next+"'s pods running", func() (bool, error) {
			return finishRunning(t, cs, ns, next, pods), nil
		})
		t0 := time.Now()
		kubetest.Eventually(t, 60*time.Second, "a probe running after "+next, func() (bool, error) {
			r, _, err := running(next)
			cur = r
			return r != "", err
		})
		d := time.Since(t0)
		t.Logf("API delay: %s seen running %v after %s's pods were told to exit", cur, d.Round(time.Millisecond), next)
		finish = max(finish, d.Seconds())
	}
	bg := metav1.DeletePropagationBackground
	if err := cs.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the probes and their pods gone", func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		}
		jl, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0 && len(jl.Items) == 0, err
	})
	return wake, finish
}

// tolerances returns how far from the simulator's time each step may be
// seen on Kubernetes, given the API path's delays (apiDelays). A step that
// no finish precedes, as a wake-up's: twice the wake delay (the probes'
// Jobs are alone; here a round writes several, and gandiva-fair's windows
// start at the first Job's arrival as the scheduler sees it, a little
// after its creation) plus 1.5 s for the stalls of a loaded machine in the
// scheduler and the API's path, which two probes do not sample. (The
// test's own polls stall too: one took 1.9 s beside a CPU hog; a step is
// compared by the window between the poll that saw it and the one before,
// see compareSteps, so that lateness is not counted.) Then 2 × the finish
// delay more for each finish at or before it in the simulator's run: a
// finish is seen that much late, what it frees starts that much late, and
// a job resumed late in a quantum that ends on the clock gets that much
// less service, so ends that much later again. Lags add up only through
// finishes: arrivals are at their times, wake-ups on the clock. A wake-up
// that brings no round shows as a step late until the next event (3 s or
// more in this workload) or as different steps.
func tolerances(simS map[string][]step, wake, finish float64) func(step) float64 {
	var fins []float64
	for _, ss := range simS {
		for _, x := range ss {
			if x.what == "finish" {
				fins = append(fins, x.at)
			}
		}
	}
	return func(x step) float64 {
		n := 0
		for _, f := range fins {
			if f <= x.at {
				n++
			}
		}
		return 1.5 + 2*wake + 2*finish*float64(n)
	}
}

// compareSteps returns a report of every job's steps, and whether any
// job's steps on Kubernetes differ from the simulator's in kind or order,
// or in time by more than tol allows. A step on Kubernetes is as far from
// the simulator's as the nearest time at which it may have happened
// (step.after to step.at): a poll that a loaded machine stalls sees it
// late, but that lateness is the test's, not the scheduler's.
func compareSteps(jobs []equivJob, simS, kubeS map[string][]step, tol func(step) float64) (string, bool) {
	var b strings.Builder
	bad, worst, slack := false, 0.0, math.Inf(1)
	for _, j := range jobs {
		name := j.ns + "/" + j.name
		s, k := simS[name], kubeS[name]
		why := ""
		if len(s) != len(k) {
			why = fmt.Sprintf("%d steps, the simulator %d", len(k), len(s))
		}
		for i := range min(len(s), len(k)) {
			if s[i].what != k[i].what {
				why = fmt.Sprintf("step %d is %s, the simulator's %s", i+1, k[i].what, s[i].what)
				break
			}
			d := offset(k[i], s[i].at)
			worst = max(worst, math.Abs(d))
			slack = min(slack, tol(s[i])-math.Abs(d))
			if math.Abs(d) > tol(s[i]) {
				why = fmt.Sprintf("step %d (%s) %+.1f s from the simulator's, more than %.1f s", i+1, s[i].what, d, tol(s[i]))
				break
			}
		}
		mark := "same"
		if why != "" {
			mark, bad = "DIFFERS: "+why, true
		}
		fmt.Fprintf(&b, "\n%s: %s\n  sim:  %s\n  kube: %s", name, mark, formatSteps(s), formatSteps(k))
	}
	fmt.Fprintf(&b, "\nlargest difference %.2f s; least room left under the tolerance %.2f s", worst, slack)
	return b.String(), bad
}

// offset is the time of step x, seen by polling, less t: of the times in
// (x.after, x.at] at which x may have happened, the nearest to t.
func offset(x step, t float64) float64 {
	switch {
	case x.after > t:
		return x.after - t
	case x.at < t:
		return x.at - t
	}
	return 0
}

// TestSimKubeEquivalence replays one workload in the simulator and on a
// local control plane (kwok nodes) under tiresias-l, gandiva and
// gandiva-fair, with the same settings, and finds the same starts,
// suspensions, resumptions and finishes of every job, in the same order,
// at the same times give or take the API's delay: the policies' wake-ups
// (tiresias-l's queue thresholds, gandiva's quanta, gandiva-fair's
// windows) drive rounds on Kubernetes as in the simulator.
//
// The workload: 4 Jobs (gangs of 8 GPUs in two pods, 4 in one, 2 in one
// and 2 in two) from two namespaces (two users for gandiva-fair) arriving
// over 17 s on 2 nodes of 4 GPUs, each ending after a known service: the
// test plays the pods, which exit once the Job has been shown running for
// that long (the engine's own grant, seen through the API); annotations
// iters and iter-time tell the engine the same as the simulator's specs.
// Its run times are such that up to 4 s more service for any job changes
// no job's steps (TestEquivWorkloadRobust), so that the API's delay cannot
// reorder its events. The simulator runs the compat performance model: no
// start-up, checkpoint or locality costs and no progress reports, as
// exclusive-mode jobs on Kubernetes report none (its finishes fall on
// whole seconds, as every run time, arrival and boundary here does); so
// Kubernetes runs with start-ups charged (Options.StartUpGrace 0, the
// default), as if it had none too: with them uncharged, a quantum would count from a job's pods
// running, seconds after the simulator's (kwok's readiness patch is at
// times refused, and retried 5 s later).
// gandiva-fair gets tickets 2:1, through the settings ConfigMap on
// Kubernetes and as EvSetting events at time 0 in the simulator.
//
// Exclusive mode, so gandiva runs with pack=false: with packing it would
// pack where Kubernetes' exclusive GPUs cannot (shared mode needs node
// agents); its time-slicing is what is compared. gandiva's quantum
// boundaries are multiples of the quantum on the engine's clock (Unix
// seconds on Kubernetes), so the workload's origin is put on one.
//
// The tolerance is measured, not tuned: before the workload, probes on
// the same plane measure the delay from a quantum boundary to its
// suspension and start seen through the API, and from a job's pods told to
// exit to the next job seen running (apiDelays); a step may be twice the
// first late plus 1.5 s, and twice the second more for each finish before
// it (tolerances says why). Steps that no finish precedes, such as the
// first threshold preemption and the first quantum boundaries, are held to
// the least. A step on Kubernetes happened between the poll that saw it
// and the one before; it is compared by the time in that window nearest
// the simulator's (a loaded machine stalls the test's polls for seconds).
// A move is a migrate step whether a poll sees the Job moving or only
// its placement changed while it runs: on an idle machine the moving
// phase can end between two polls.
//
// Not parallel: its times are measured, so it runs alone among the
// package's tests.
func TestSimKubeEquivalence(t *testing.T) {
	if testing.Short() {
		t.Skip("long: about 3 minutes")
	}
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	const nodes, gpus = 2, 4
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: nodes, GPUs: gpus})
	kubetest.Namespace(t, cs, "gandiva-system")
	wake, finish := apiDelays(t, p, cs, "probe", nodes, gpus)
	for _, c := range equivCases {
		t.Run(c.policy, func(t *testing.T) {
			jobs := c.jobs()
			want := simSteps(t, c.policy, c.settings, nodes, gpus, jobs)
			for ns := range map[string]bool{jobs[0].ns: true, jobs[1].ns: true} {
				kubetest.Namespace(t, cs, ns)
			}
			if c.settings != nil {
				ctx := context.Background()
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gandiva-system", Name: "gandiva-settings"}, Data: c.settings}
				if _, err := cs.CoreV1().ConfigMaps("gandiva-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := cs.CoreV1().ConfigMaps("gandiva-system").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
						t.Error(err)
					}
				}()
			}
			g := runGandiva(t, p, Options{Policy: c.policy})
			defer g.stop()
			kubetest.Eventually(t, 60*time.Second, "the scheduler leading", func() (bool, error) {
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.s != nil, nil
			})
			// the origin: a multiple of the quantum on the Unix clock, at
			// least 2 s away
			origin := time.Unix((time.Now().Unix()+2)/equivQuantum*equivQuantum+equivQuantum, 0)
			got := kubeRun(t, cs, origin, jobs, 5*time.Minute)
			report, bad := compareSteps(jobs, want, got, tolerances(want, wake, finish))
			if bad {
				t.Fatalf("steps on Kubernetes (kube) and in the simulator (sim), in seconds from the first arrival (API delays: wake %.2f s, finish %.2f s):%s", wake, finish, report)
			}
			t.Logf("the same steps (API delays: wake %.2f s, finish %.2f s):%s", wake, finish, report)
		})
	}
}

// equivWorkload is the workload of TestSimKubeEquivalence (namespaces
// get a prefix per policy: one control plane serves the three in turn).
var equivWorkload = []equivJob{
	{ns: "a", name: "a", pods: 2, gpus: 4, submit: 0, run: 25},
	{ns: "b", name: "b", pods: 1, gpus: 4, submit: 4, run: 14},
	{ns: "a", name: "c", pods: 1, gpus: 2, submit: 13, run: 18},
	{ns: "b", name: "d", pods: 2, gpus: 1, submit: 17, run: 8},
}

// equivCase is one policy of TestSimKubeEquivalence, with its settings.
type equivCase struct {
	prefix, policy string
	settings       map[string]string // the settings ConfigMap's data
}

var equivCases = []equivCase{
	{"tl", "tiresias-l:limits=48", nil},
	{"gv", "gandiva:quantum=10;pack=false", nil},
	{"gf", "gandiva-fair:quantum=10", map[string]string{"tickets.gf-a": "2", "tickets.gf-b": "1"}},
}

// equivQuantum is the quanta of equivCases: the workload's origin on
// Kubernetes is a multiple of it on the Unix clock.
const equivQuantum = 10

// jobs returns the workload in the case's namespaces.
func (c equivCase) jobs() []equivJob {
	var out []equivJob
	for _, j := range equivWorkload {
		j.ns = c.prefix + "-" + j.ns
		out = append(out, j)
	}
	return out
}

// kinds lists each job's steps' kinds.
func kinds(m map[string][]step, jobs []equivJob) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "%s/%s:", j.ns, j.name)
		for _, x := range m[j.ns+"/"+j.name] {
			b.WriteString(" " + x.what)
		}
		b.WriteString("; ")
	}
	return b.String()
}

// The premise of TestSimKubeEquivalence, checked in the simulator alone:
// the workload's steps are the same, in kind and order, when any one job,
// or every job, needs up to 4 s more service, as a job on Kubernetes
// does when the API's delay makes it start or resume late within a
// quantum that ends on the clock (and its finish is seen late). So that
// delay cannot reorder the workload's events and the comparison of times
// is meaningful; a change of a policy that makes the workload fragile
// fails here, saying the workload needs new run times, not on the
// control plane.
func TestEquivWorkloadRobust(t *testing.T) {
	for _, c := range equivCases {
		jobs := c.jobs()
		base := kinds(simSteps(t, c.policy, c.settings, 2, 4, jobs), jobs)
		for _, d := range []float64{0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4} {
			for who := -1; who < len(jobs); who++ {
				more := slices.Clone(jobs)
				for i := range more {
					if who < 0 || who == i {
						more[i].run += d
					}
				}
				if got := kinds(simSteps(t, c.policy, c.settings, 2, 4, more), jobs); got != base {
					which := "every job"
					if who >= 0 {
						which = "job " + jobs[who].name
					}
					t.Fatalf("%s: with %.1f s more service for %s the steps are\n  %s\nnot\n  %s", c.policy, d, which, got, base)
				}
			}
		}
	}
}

// A step on Kubernetes is compared to the simulator's by the nearest time
// at which it may have happened: one seen by a poll that ended 1.8 s
// after the simulator's time, where the poll before, at which it had not
// happened yet, began 0.1 s after it, is 0.1 s late, within 1.5 s; one
// whose polls both came after the tolerance is late; one seen early by
// a quick poll is early by the poll's end.
func TestCompareStepsPollWindow(t *testing.T) {
	jobs := []equivJob{{ns: "n", name: "j"}}
	sim := map[string][]step{"n/j": {{"start", 0, 0}, {"suspend", 30, 30}}}
	tol := func(step) float64 { return 1.5 }
	for _, c := range []struct {
		at, after float64
		bad       bool
	}{
		{31.8, 30.1, false},
		{31.8, 31.6, true},
		{29.0, 28.9, false},
		{28.4, 28.3, true},
		{30.2, 30.1, false},
	} {
		kube := map[string][]step{"n/j": {{"start", 0.1, 0}, {"suspend", c.at, c.after}}}
		if report, bad := compareSteps(jobs, sim, kube, tol); bad != c.bad {
			t.Errorf("suspend seen at %.1f after a poll at %.1f: differs %v, want %v:%s", c.at, c.after, bad, c.bad, report)
		}
	}
}

// A Job seen running on other nodes than at the poll before has migrated,
// although no poll saw it moving; one seen moving then running again has
// migrated once (at the moving); one whose placement is unchanged has not.
func TestPollStepMoveBetweenPolls(t *testing.T) {
	for _, c := range []struct {
		phase, was, ph, where, want string
	}{
		{"running", "gpu-0=2", "running", "gpu-1=2", "migrate"},
		{"running", "gpu-0=2", "moving", "gpu-1=2", "migrate"},
		{"moving", "gpu-1=2", "running", "gpu-1=2", ""},
		{"running", "gpu-0=2", "running", "gpu-0=2", ""},
		{"suspended", "", "running", "gpu-1=2", "resume"},
	} {
		if got := pollStep(c.phase, c.was, c.ph, c.where, true); got != c.want {
			t.Errorf("%s on %q then %s on %q: step %q, want %q", c.phase, c.was, c.ph, c.where, got, c.want)
		}
	}
}
