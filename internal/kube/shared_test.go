package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// agentHarness plays the node agents of shared nodes for the scheduler's
// tests (the real one is internal/kube/agent): it reads the pods'
// gandiva.io/assign, carries each new generation out a little later (the
// next mini-batch boundary), and writes gandiva.io/agent-status with fake
// progress (rate mini-batches per second while running). A pod that has
// done finish mini-batches exits 0 (kwok marks it Succeeded). It records
// what it saw: a generation going backwards, two pods running at once on
// one GPU (the tests run policies that do not pack), a pod bound without
// an assignment.
type agentHarness struct {
	t      testing.TB
	cs     kubernetes.Interface
	finish int64
	rate   float64
	// packs: pods may run together on a GPU (the policy packs); the
	// harness counts the times one was told to run beside another
	packs  bool
	packed int
	// fail: the first pod of these Jobs (by name) is reported failed by
	// its agent instead of run
	fail map[string]bool

	mu         sync.Mutex
	pods       map[types.UID]*hpod
	running    map[string][]types.UID // "node/gpu" → the pods running there
	violations []string
	// timeline: what the harness carried out, in order (shown with violations)
	timeline []string
	suspends int // suspensions carried out (of pods that had run)
	resumes  int // resumptions in place carried out (of pods that had run)
	starts   int // pods that ran
	maxGen   int64
}

type hpod struct {
	name, node string
	gen        int64     // the assignment carried out
	state      string    // its state
	gpus       []int     // its GPUs
	seen       time.Time // when a newer assignment was first seen
	seenGen    int64
	done       float64
	ranAt      time.Time // last progress accounting while running
	pubAt      time.Time
	pubGen     int64 // the generation last published
	exited     bool
	ran        bool  // it ran at some point
	lastAssign int64 // the newest generation ever read
}

func startAgentHarness(t testing.TB, cs kubernetes.Interface, finish int64, rate float64, packs bool) *agentHarness {
	h := &agentHarness{t: t, cs: cs, finish: finish, rate: rate, packs: packs, pods: map[types.UID]*hpod{}, running: map[string][]types.UID{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			h.step(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *agentHarness) violate(format string, args ...any) {
	h.violations = append(h.violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (h *agentHarness) step(ctx context.Context) {
	l, err := h.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	alive := map[types.UID]bool{}
	for i := range l.Items {
		p := &l.Items[i]
		if _, ok := p.Annotations[shared.AnnGPUs]; !ok || p.Spec.NodeName == "" {
			continue
		}
		hp := h.pods[p.UID]
		if hp == nil {
			hp = &hpod{name: p.Namespace + "/" + p.Name, node: p.Spec.NodeName}
			h.pods[p.UID] = hp
		}
		if terminal(p) || p.DeletionTimestamp != nil || hp.exited {
			continue
		}
		alive[p.UID] = true
		a, err := shared.ParseAssign(p.Annotations[shared.AnnAssign])
		if err != nil {
			h.violate("pod %s bound without a valid assignment: %v", hp.name, err)
			continue
		}
		if a.Gen < hp.lastAssign {
			h.violate("pod %s: assignment generation went back from %d to %d", hp.name, hp.lastAssign, a.Gen)
		}
		hp.lastAssign = max(hp.lastAssign, a.Gen)
		h.maxGen = max(h.maxGen, a.Gen)
		if hp.state == shared.Running {
			hp.done += now.Sub(hp.ranAt).Seconds() * h.rate
			hp.ranAt = now
		}
		if a.Gen > hp.gen {
			if hp.seenGen != a.Gen {
				hp.seenGen, hp.seen = a.Gen, now
			}
			if job := p.Labels["job-name"]; h.fail[job] && now.Sub(hp.seen) >= 100*time.Millisecond {
				st := shared.Status{Gen: a.Gen, State: shared.Failed, Error: "test: the agent cannot carry it out", At: now.UTC()}
				b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{shared.AnnStatus: st.String()}}})
				if _, err := h.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, b, metav1.PatchOptions{}); err == nil {
					delete(h.fail, job)
					hp.exited = true // the harness leaves it alone from now on
				}
				continue
			}
			if now.Sub(hp.seen) >= 100*time.Millisecond { // the next mini-batch boundary
				if hp.gpus != nil && !slices.Equal(hp.gpus, a.GPUs) {
					h.violate("pod %s: GPUs changed from %v to %v (a move must be a new pod)", hp.name, hp.gpus, a.GPUs)
				}
				switch {
				case a.State == shared.Running && hp.state != shared.Running:
					for _, g := range a.GPUs {
						k := fmt.Sprintf("%s/%d", hp.node, g)
						if o := h.running[k]; len(o) > 0 {
							if h.packs {
								h.packed++
							} else {
								other := h.pods[o[0]]
								h.violate("pod %s told to run on %s (generation %d) while pod %s runs there (not acknowledged suspended: carried out generation %d, %s)", hp.name, k, a.Gen, other.name, other.gen, other.state)
							}
						}
						h.running[k] = append(h.running[k], p.UID)
					}
					if hp.ran {
						h.resumes++
					} else {
						h.starts++
					}
					hp.ran = true
					hp.ranAt = now
				case a.State == shared.Suspended && hp.state == shared.Running:
					h.release(p.UID, hp)
					h.suspends++
				}
				hp.gen, hp.state, hp.gpus = a.Gen, a.State, a.GPUs
				h.timeline = append(h.timeline, fmt.Sprintf("%s %s on %s%v: generation %d %s", now.Format("15:04:05.000"), hp.name, hp.node, a.GPUs, a.Gen, a.State))
			}
		}
		if hp.state == shared.Running && int64(hp.done) >= h.finish {
			h.release(p.UID, hp)
			hp.exited = true
			body := []byte(`{"metadata":{"annotations":{"` + kubetest.AnnExit + `":"0"}}}`)
			if _, err := h.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
				hp.exited = false
			}
			continue
		}
		if hp.gen > hp.pubGen || (hp.state == shared.Running && now.Sub(hp.pubAt) > 300*time.Millisecond) {
			st := shared.Status{Gen: hp.gen, State: hp.state, GPUs: hp.gpus, Done: int64(hp.done), IterTime: 1 / h.rate, Ready: true, At: now.UTC()}
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{shared.AnnStatus: st.String()}}})
			if _, err := h.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, b, metav1.PatchOptions{}); err == nil {
				hp.pubAt, hp.pubGen = now, hp.gen
			}
		}
	}
	for uid, hp := range h.pods {
		if !alive[uid] && hp.state == shared.Running {
			h.release(uid, hp)
			hp.state = ""
		}
	}
}

func (h *agentHarness) release(uid types.UID, hp *hpod) {
	for _, g := range hp.gpus {
		k := fmt.Sprintf("%s/%d", hp.node, g)
		h.running[k] = slices.DeleteFunc(h.running[k], func(u types.UID) bool { return u == uid })
	}
	hp.state = shared.Suspended
}

func (h *agentHarness) check(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.violations) > 0 {
		t.Fatalf("%d violations, first ones:\n%s\nwhat the agents carried out last:\n%s", len(h.violations), strings.Join(h.violations[:min(10, len(h.violations))], "\n"),
			strings.Join(h.timeline[max(0, len(h.timeline)-40):], "\n"))
	}
}

func (h *agentHarness) counts() (starts, suspends, resumes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts, h.suspends, h.resumes
}

// reservation returns the reservation pod of a node, if any.
func reservation(t testing.TB, cs kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods("gandiva-system").List(context.Background(), metav1.ListOptions{LabelSelector: shared.LabelReservation + "=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if l.Items[i].DeletionTimestamp == nil {
			return &l.Items[i]
		}
	}
	return nil
}

// stableReservation waits until node's reservation pod has been the same
// pod, not ended, for d, and returns it.
func stableReservation(t testing.TB, cs kubernetes.Interface, node string, d time.Duration) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	var since time.Time
	kubetest.Eventually(t, 60*time.Second, "a reservation on "+node+" that stays "+d.String(), func() (bool, error) {
		r := reservation(t, cs, node)
		switch {
		case r == nil || terminal(r):
			last = nil
			return false, nil
		case last == nil || last.UID != r.UID:
			last, since = r, time.Now()
			return false, nil
		}
		return time.Since(since) >= d, nil
	})
	return last
}

// Three one-GPU shared jobs on one one-GPU shared node under gandiva
// (time-slicing, quantum 2 s, no packing) take turns: each is started,
// suspended in place and resumed by assignments that the test's agent
// harness carries out; none is told to run while another has not
// acknowledged its suspension; generations never go back; all complete;
// progress reaches the engine; the view shows a shared job suspended in
// place; Events say Suspended and Resumed.
func TestSharedTimeSlicing(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 1, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	h := startAgentHarness(t, cs, 300, 50, false) // 6 s of running each: several quanta
	g := runGandiva(t, p, Options{Policy: "gandiva:quantum=2;pack=false;migrate=false"})
	kubetest.Eventually(t, 60*time.Second, "the shared node's reservation pod", func() (bool, error) {
		r := reservation(t, cs, nodes[0])
		return r != nil && gpusOf(&r.Spec) == 1 && r.Spec.NodeName == nodes[0], nil
	})
	for _, name := range []string{"a", "b", "c"} {
		createJob(t, cs, jobSpec{ns: "team-a", name: name, pods: 1, gpus: 1, shared: true})
	}
	sawSuspended := false
	kubetest.Eventually(t, 3*time.Minute, "jobs a, b and c complete", func() (bool, error) {
		h.check(t)
		if !sawSuspended {
			views, err := List(ctx, cs, "team-a")
			if err != nil {
				return false, err
			}
			for _, v := range views {
				if v.Shared && v.State == StateSuspended && len(v.Pods) == 1 && v.Pods[0].Node != "" && v.Pods[0].Assign == shared.Suspended {
					sawSuspended = true
				}
			}
		}
		for _, name := range []string{"a", "b", "c"} {
			if ok, err := jobDone(cs, "team-a", name)(); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	h.check(t)
	starts, suspends, resumes := h.counts()
	t.Logf("harness: %d starts, %d suspensions, %d resumptions in place; stats %+v", starts, suspends, resumes, g.stats())
	if starts != 3 || suspends < 2 || resumes < 2 {
		t.Fatalf("%d starts, %d suspensions, %d resumptions in place; want 3 starts and at least 2 of each (time-slicing one GPU)", starts, suspends, resumes)
	}
	if !sawSuspended {
		t.Error("the view never showed a shared job suspended in place")
	}
	// every job ran on its own pod only: one pod per Job, never replaced
	for _, name := range []string{"a", "b", "c"} {
		_, all, err := jobPods(cs, "team-a", name)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 {
			t.Errorf("job %s had %d pods; a shared job is suspended in place (one pod)", name, len(all))
		}
	}
	reasons := map[string]bool{}
	for _, name := range []string{"a", "b", "c"} {
		v, err := Describe(ctx, cs, "team-a", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range v.Events {
			reasons[e.Reason] = true
		}
	}
	for _, r := range []string{"Started", "Suspended", "Resumed", "Scheduled"} {
		if !reasons[r] {
			t.Errorf("no %s Event on the jobs (got %v)", r, reasons)
		}
	}
}

// Shared and exclusive nodes: the reservation pod waits for the GPUs
// another scheduler's pod holds on the shared node (and shared jobs wait
// for it), then holds all of them (what every scheduler's fit counts);
// exclusive jobs never land on the shared node, shared jobs never on the
// exclusive one; a deleted reservation is recreated; a node no longer
// shared keeps its reservation until its shared pods end.
func TestSharedReservationAndSeparation(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	sh := kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 2, Labels: map[string]string{shared.LabelSharedNode: "true"}})[0]
	ex := kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "excl-", Count: 1, GPUs: 2})[0]
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other"},
		Spec: corev1.PodSpec{NodeName: sh, Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPU: resource.MustParse("1")}}}}}}
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := startAgentHarness(t, cs, 1<<40, 10, false) // they run until the test ends them
	runGandiva(t, p, Options{Policy: "fjf"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "s", pods: 1, gpus: 2, shared: true})
	createJob(t, cs, jobSpec{ns: "team-a", name: "e1", pods: 1, gpus: 2})
	kubetest.Eventually(t, 60*time.Second, "exclusive job e1 on the exclusive node", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "e1")
		return len(b) == 1 && b[0].Spec.NodeName == ex, err
	})
	// another scheduler's pod holds a GPU of the shared node: no
	// reservation, and the shared job waits
	createJob(t, cs, jobSpec{ns: "team-a", name: "e2", pods: 1, gpus: 1})
	for range 30 {
		if r := reservation(t, cs, sh); r != nil {
			t.Fatalf("reservation pod %s created while another scheduler's pod holds a GPU of %s", r.Name, sh)
		}
		if n := boundCount(t, cs, "team-a", "s") + boundCount(t, cs, "team-a", "e2"); n != 0 {
			t.Fatalf("%d pods of s (shared, node not reserved) and e2 (exclusive, no exclusive GPU free) bound", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cs.CoreV1().Pods("team-a").Delete(ctx, "other", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "the reservation holds both GPUs, s runs there on GPUs [0 1]", func() (bool, error) {
		r := reservation(t, cs, sh)
		b, _, err := jobPods(cs, "team-a", "s")
		if r == nil || len(b) != 1 {
			return false, err
		}
		a, err := shared.ParseAssign(b[0].Annotations[shared.AnnAssign])
		return gpusOf(&r.Spec) == 2 && b[0].Spec.NodeName == sh && err == nil && slices.Equal(a.GPUs, []int{0, 1}), nil
	})
	// every scheduler's fit counts the reservation: the shared node's
	// nvidia.com/gpu are all requested
	l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + sh})
	if err != nil {
		t.Fatal(err)
	}
	req := 0
	for _, p := range l.Items {
		if !terminal(&p) {
			req += gpusOf(&p.Spec)
		}
	}
	if req != 2 {
		t.Fatalf("pods on %s request %d nvidia.com/gpu, want 2 (the reservation's)", sh, req)
	}
	if n := boundCount(t, cs, "team-a", "e2"); n != 0 {
		t.Fatalf("exclusive job e2 bound although the only free GPUs are the shared node's")
	}
	// a deleted reservation is recreated while its shared pod runs (gone
	// at once: kwok deletes a terminating pod by name, and did so again
	// after the new one of the same name was there)
	r := reservation(t, cs, sh)
	if err := cs.CoreV1().Pods("gandiva-system").Delete(ctx, r.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the reservation recreated", func() (bool, error) {
		n := reservation(t, cs, sh)
		return n != nil && n.UID != r.UID, nil
	})
	// kwok plays the old pod's deletion by its name, and may end the new
	// one (which Gandiva then replaces): go on once one has stayed 2 s
	stableReservation(t, cs, sh, 2*time.Second)
	// the node stops being shared: the reservation stays while s runs,
	// and comes back if it is deleted
	node, err := cs.CoreV1().Nodes().Get(ctx, sh, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(node.Labels, shared.LabelSharedNode)
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if reservation(t, cs, sh) == nil {
			t.Fatal("the reservation was deleted while shared job s runs on the node")
		}
		if n := boundCount(t, cs, "team-a", "e2"); n != 0 {
			t.Fatal("exclusive job e2 bound on the former shared node while its reservation holds the GPUs")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r = reservation(t, cs, sh)
	if err := cs.CoreV1().Pods("gandiva-system").Delete(ctx, r.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the reservation recreated on the former shared node while s runs", func() (bool, error) {
		n := reservation(t, cs, sh)
		return n != nil && n.UID != r.UID, nil
	})
	if n := boundCount(t, cs, "team-a", "e2"); n != 0 {
		t.Fatal("exclusive job e2 bound on the former shared node while its reservation was gone")
	}
	// a reservation that ends (evicted, failed) is replaced too
	r = stableReservation(t, cs, sh, 2*time.Second)
	failed := []byte(`{"status":{"phase":"Failed","reason":"Evicted"}}`)
	if _, err := cs.CoreV1().Pods("gandiva-system").Patch(ctx, r.Name, types.MergePatchType, failed, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the failed reservation replaced while s runs", func() (bool, error) {
		n := reservation(t, cs, sh)
		return n != nil && n.UID != r.UID && !terminal(n), nil
	})
	if n := boundCount(t, cs, "team-a", "e2"); n != 0 {
		t.Fatal("exclusive job e2 bound on the former shared node while its reservation had failed")
	}
	finishPods(t, cs, "team-a", "s")
	kubetest.Eventually(t, 60*time.Second, "job s complete", jobDone(cs, "team-a", "s"))
	kubetest.Eventually(t, 60*time.Second, "the reservation deleted once s ended", func() (bool, error) {
		return reservation(t, cs, sh) == nil, nil
	})
	// now an exclusive node: e2 may run there
	kubetest.Eventually(t, 60*time.Second, "e2 on the former shared node", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "e2")
		return len(b) == 1 && b[0].Spec.NodeName == sh, err
	})
	h.check(t)
}

// kill -9 of `gandiva kube` in shared mode, two replicas at all times,
// while gandiva time-slices shared jobs on two shared nodes: assignment
// generations never go back, no pod is told to run on a GPU before the
// pod there acknowledged its suspension, every bound pod has an
// assignment, no Job ever has more pods bound than its gang, and every
// Job completes.
func TestSharedKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 2, GPUs: 2, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.WriteKubeconfig(kc, "admin"); err != nil {
		t.Fatal(err)
	}
	h := startAgentHarness(t, cs, 200, 50, false) // 4 s of running each
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("j%d", i)
		names = append(names, name)
		createJob(t, cs, jobSpec{ns: "team-a", name: name, pods: 1 + i%2, gpus: 1, shared: true, preemptible: i%4 == 0})
	}
	// the gang bound: never more pods holding GPUs than its gang
	var (
		mu       sync.Mutex
		overfull []string
	)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for i, name := range names {
				b, _, err := jobPods(cs, "team-a", name)
				if err == nil && len(b) > 1+i%2 {
					mu.Lock()
					overfull = append(overfull, fmt.Sprintf("job %s: %d pods bound, gang of %d", name, len(b), 1+i%2))
					mu.Unlock()
				}
			}
		}
	}()
	defer func() { close(stop); <-watched }()
	nextID := 0
	start := func() (string, *exec.Cmd) {
		nextID++
		id := fmt.Sprintf("replica-%d", nextID)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GANDIVA_KUBE_CHILD="+kc, "GANDIVA_KUBE_ID="+id,
			"GANDIVA_KUBE_POLICY=gandiva:quantum=1;pack=false;migrate=false")
		cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return id, cmd
	}
	replicas := map[string]*exec.Cmd{}
	for range 2 {
		id, cmd := start()
		replicas[id] = cmd
	}
	t.Cleanup(func() {
		for _, cmd := range replicas {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		}
	})
	holder := func() (id, term string) {
		l, err := cs.CoordinationV1().Leases("gandiva-system").Get(ctx, "gandiva-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", ""
		}
		return *l.Spec.HolderIdentity, *l.Spec.HolderIdentity + "/" + l.Spec.AcquireTime.String()
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpJobs(t, cs, "team-a")
		}
	})
	rng := rand.New(rand.NewPCG(3, 4))
	last := ""
	for kills := 0; kills < 6; kills++ {
		kubetest.Eventually(t, time.Minute, "a new leader", func() (bool, error) {
			id, term := holder()
			return term != "" && term != last && replicas[id] != nil, nil
		})
		var victim string
		victim, last = holder()
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond) // while it suspends and resumes
		h.check(t)
		cmd := replicas[victim]
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		delete(replicas, victim)
		id, c := start()
		replicas[id] = c
	}
	for _, name := range names {
		kubetest.Eventually(t, 3*time.Minute, "job "+name+" complete", func() (bool, error) {
			h.check(t)
			return jobDone(cs, "team-a", name)()
		})
	}
	h.check(t)
	mu.Lock()
	defer mu.Unlock()
	if len(overfull) > 0 {
		t.Fatalf("%d violations, first: %v", len(overfull), overfull[:min(5, len(overfull))])
	}
	starts, suspends, resumes := h.counts()
	t.Logf("6 kills; harness: %d pods ran, %d suspensions, %d resumptions in place, highest generation %d", starts, suspends, resumes, h.maxGen)
	if suspends == 0 || resumes == 0 {
		t.Fatalf("%d suspensions, %d resumptions: the test did not exercise time-slicing", suspends, resumes)
	}
}

// Packing: gandiva (packing trials on) packs two shared jobs whose memory
// fits together on one over-subscribed GPU; the pods are told to run
// together only then (a Packed Event names the partner), and both
// complete.
func TestSharedPacking(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 1, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	h := startAgentHarness(t, cs, 400, 50, true)
	runGandiva(t, p, Options{Policy: "gandiva:quantum=2;migrate=false"})
	for _, name := range []string{"a", "b"} {
		createJob(t, cs, jobSpec{ns: "team-a", name: name, pods: 1, gpus: 1, shared: true,
			annotations: map[string]string{AnnMemGiB: "4"}})
	}
	for _, name := range []string{"a", "b"} {
		kubetest.Eventually(t, 3*time.Minute, "job "+name+" complete", func() (bool, error) {
			h.check(t)
			return jobDone(cs, "team-a", name)()
		})
	}
	h.mu.Lock()
	packed := h.packed
	h.mu.Unlock()
	var packs []string
	for _, name := range []string{"a", "b"} {
		v, err := Describe(ctx, cs, "team-a", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range v.Events {
			if e.Reason == "Packed" {
				packs = append(packs, name+": "+e.Message)
			}
		}
	}
	t.Logf("pods told to run beside another %d times; Packed Events: %q", packed, packs)
	if packed == 0 || len(packs) == 0 {
		t.Fatalf("no packing: %d times told to run together, Packed Events %q", packed, packs)
	}
}

// An agent that reports a pod failed: a Warning Event names the error, and
// the preemptible Job's pod is replaced (the Job suspended until it is
// gone, then started again: a new pod, bound with a new assignment),
// which runs and completes.
func TestSharedAgentFailedReplacesPod(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 1, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	h := startAgentHarness(t, cs, 50, 50, false)
	h.mu.Lock()
	h.fail = map[string]bool{"f": true}
	h.mu.Unlock()
	runGandiva(t, p, Options{Policy: "fifo"})
	createJob(t, cs, jobSpec{ns: "team-a", name: "f", pods: 1, gpus: 1, shared: true, preemptible: true})
	kubetest.Eventually(t, 2*time.Minute, "job f complete", func() (bool, error) {
		h.check(t)
		return jobDone(cs, "team-a", "f")()
	})
	_, all, err := jobPods(cs, "team-a", "f")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Describe(ctx, cs, "team-a", "f")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, e := range v.Events {
		reasons[e.Reason] = e.Message
	}
	t.Logf("pods %d, events %v", len(all), reasons)
	if !strings.Contains(reasons["AgentFailed"], "test: the agent cannot carry it out") || !strings.Contains(reasons["Replacing"], "failed") {
		t.Fatalf("events %v: want AgentFailed with the agent's error, and Replacing", reasons)
	}
	starts, _, _ := h.counts()
	h.mu.Lock()
	bound := len(h.pods) // the pods of f the harness saw bound
	h.mu.Unlock()
	if starts != 1 || bound != 2 || len(all) != 1 || all[0].Status.Phase != corev1.PodSucceeded {
		t.Fatalf("%d pods ran, %d were bound, %d left: want the failed pod replaced by one that ran and succeeded", starts, bound, len(all))
	}
}
