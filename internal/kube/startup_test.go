package kube

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/gandiva-sched/gandiva/internal/cluster"
	"github.com/gandiva-sched/gandiva/internal/engine"
	"github.com/gandiva-sched/gandiva/internal/policy"
	"github.com/gandiva-sched/gandiva/internal/policy/registry"
)

// TestStartUpEndsWhenAllPodsRun: a gang placed by the engine is starting
// up, and charged no service, until every one of its pods runs on the
// placement's nodes; the executor then reports it ready (EvReady), and
// service counts from then on. Pods still pending, being deleted, or
// running elsewhere do not count. Without the option (StartUpGrace 0, the
// default) there is no start-up: service counts from the placement.
func TestStartUpEndsWhenAllPodsRun(t *testing.T) {
	for _, charged := range []bool{false, true} {
		t.Run(fmt.Sprintf("charged=%v", charged), func(t *testing.T) {
			o := Options{Policy: "fifo", ClockSpeed: 100}
			if !charged {
				o.StartUpGrace = 10 * time.Minute
			}
			o.defaults()
			cs := fake.NewClientset()
			s, err := newScheduler(cs, cs, o, record.NewFakeRecorder(64))
			if err != nil {
				t.Fatal(err)
			}
			eo := engineOptions(o, s.clk, &engine.FailurePolicy{MaxAttempts: 1}, nil)
			if charged != !eo.StartUps || (!charged && eo.StartUpGrace != 600*100) {
				t.Fatalf("engine options %+v for StartUpGrace %v at speed 100", eo, o.StartUpGrace)
			}
			c := &cluster.Cluster{Name: "kubernetes"}
			names := []string{"n0", "n1", "n2"}
			for _, n := range names {
				if _, err := c.AddServer(n, "V100", 8, "r", 0, 64); err != nil {
					t.Fatal(err)
				}
			}
			pol, err := registry.New("fifo", policy.Config{})
			if err != nil {
				t.Fatal(err)
			}
			s.c = c
			s.x = &kexec{c: c, node: func(sv cluster.ServerID) string { return names[sv] }}
			s.eng = engine.New(c, pol, s.x, eo)
			id, err := s.eng.Submit(0, &cluster.JobSpec{Name: "g", User: "u", GPUs: 16, Iters: 1000, IterTime: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.eng.Round(0); err != nil {
				t.Fatal(err)
			}
			in := s.x.get(id)
			if !in.run || len(in.place) != 2 {
				t.Fatalf("the gang of 16 is not placed on two nodes: %v", in)
			}
			var on []string // its nodes, and one it is not on
			other := ""
			for _, n := range names {
				if in.place[n] > 0 {
					on = append(on, n)
				} else {
					other = n
				}
			}
			ws := &wstate{id: id, w: &workload{key: "pods/team/g", podGPUs: 8, gang: 2}}
			pod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)},
					Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
			}
			step := func(now float64, pods ...*corev1.Pod) {
				t.Helper()
				var live []*corev1.Pod
				for _, p := range pods {
					if p.DeletionTimestamp == nil {
						live = append(live, p)
					}
				}
				s.bindPods(ws, live, pods, in.place, 2, 8, now)
			}
			j := s.eng.Job(id)
			starting := func(now float64, want bool, wantAtt float64, what string) {
				t.Helper()
				if charged {
					want = false
				}
				if j.StartingUp != want {
					t.Errorf("%s: starting up %v, want %v", what, j.StartingUp, want)
				}
				if a := j.Attained(now); a != wantAtt {
					t.Errorf("%s: attained %v GPU-s at %v, want %v", what, a, now, wantAtt)
				}
			}
			a0 := pod("a", on[0], corev1.PodPending)
			b0 := pod("b", on[1], corev1.PodPending)
			step(100, a0, b0)
			att := func(now, from float64) float64 {
				if charged {
					return 16 * now
				}
				return 16 * (now - from)
			}
			starting(100, true, att(100, 100), "both pods bound, pending")
			a1 := pod("a", on[0], corev1.PodRunning)
			step(200, a1, b0)
			starting(200, true, att(200, 200), "one pod of two running")
			// one running on a node not of the placement, one leaving
			gone := pod("b-old", on[1], corev1.PodRunning)
			gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			step(300, a1, gone, pod("b", other, corev1.PodRunning))
			starting(300, true, att(300, 300), "one pod running elsewhere, one leaving")
			step(400, a1, pod("b", on[1], corev1.PodRunning))
			starting(400, false, att(400, 400), "both pods running")
			starting(500, false, att(500, 400), "a while after")
			if !charged && j.StartUp != 400 {
				t.Errorf("start-up measured %v s, want 400", j.StartUp)
			}
		})
	}
}
