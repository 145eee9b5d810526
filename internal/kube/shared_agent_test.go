package kube

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	trainerpkg "github.com/gandiva-sched/gandiva/examples/trainer/trainer"
	"github.com/gandiva-sched/gandiva/internal/kube/agent"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// eventReasons counts the reasons of the Events of job ns/name (as
// Describe gathers them).
func eventReasons(t *testing.T, cs kubernetes.Interface, ns, name string) map[string]int {
	t.Helper()
	v, err := Describe(context.Background(), cs, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range v.Events {
		reasons[e.Reason]++
	}
	return reasons
}

// startNodeAgent runs the node agent of node (package agent, as `gandiva
// agent --kube` does) until the test ends, its sockets in a new directory
// whose path it returns; the test fails if the agent returns an error.
func startNodeAgent(t *testing.T, cs kubernetes.Interface, node string) string {
	t.Helper()
	sockets, err := os.MkdirTemp("", "gs") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockets) })
	actx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agent.Run(actx, cs, agent.Options{Node: node, SocketDir: sockets, ReportEvery: 200 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("agent", node)})
	}()
	t.Cleanup(func() {
		stopAgent()
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return sockets
}

// sharedTrainerJob is trainerJob as a shared job (gandiva.io/gpus, no
// nvidia.com/gpu) whose container reaches the node agent as
// deploy/examples/shared-job.yaml says: the downward API names the pod, and
// the hostPath sockets directory is mounted at /run/gandiva with
// subPathExpr $(GANDIVA_POD_UID), so the pod sees its own socket only.
func sharedTrainerJob(ns, name, dir, sockets string, steps int) jobSpec {
	return attachShared(trainerJob(ns, name, dir, steps), sockets)
}

// attachShared makes js a shared job whose container reaches its node
// agent through the sockets directory (see sharedTrainerJob).
func attachShared(js jobSpec, sockets string) jobSpec {
	js.shared = true
	field := func(env, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	js.env = append(js.env,
		field(shared.EnvPodUID, "metadata.uid"),
		field(shared.EnvPodName, "metadata.name"),
		field(shared.EnvPodNamespace, "metadata.namespace"),
		corev1.EnvVar{Name: shared.EnvSocket, Value: "/run/gandiva/" + shared.SocketName},
		corev1.EnvVar{Name: "GANDIVA_REPORT_EVERY", Value: "0.2"},
	)
	js.mounts = []corev1.VolumeMount{{Name: "gandiva-agent", MountPath: "/run/gandiva", SubPathExpr: "$(" + shared.EnvPodUID + ")"}}
	js.volumes = []corev1.Volume{{Name: "gandiva-agent", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: sockets}}}}
	return js
}

// TestSharedAgentTimeSlicesTrainers is shared mode end to end:
// three trainer pods with gandiva.io/gpus: 1 on one kwok node with one GPU,
// time-sliced by `gandiva kube` under the gandiva policy through the real
// node agent (`gandiva agent --kube`, package agent) and the in-job client
// in attached mode. Each job runs in one pod and one process from start to
// end (suspended in place, its state in host memory); the jobs take turns
// (every one is suspended at least once, and no two compute on the GPU at
// the same time: their ledgers' busy stretches do not overlap); every
// checksum equals that of an uninterrupted run.
func TestSharedAgentTimeSlicesTrainers(t *testing.T) {
	t.Parallel() // a control plane of its own; it mostly waits
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 1, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	kubetest.StartKubelet(t, cs, map[string]string{"trainer": kubetest.Trainer(t)})

	sockets := startNodeAgent(t, cs, nodes[0])
	g := runGandiva(t, p, Options{Policy: "gandiva:quantum=2;pack=false;migrate=false"})

	const steps = 300 // 20 ms each: 6 s of mini-batches per job, three 2 s quanta at least
	want := kubetest.Uninterrupted(t, "-steps", strconv.Itoa(steps), "-step-time", "0s", "-dim", "256", "-seed", "7")
	dir := t.TempDir()
	names := []string{"a", "b", "c"}
	for _, name := range names {
		createJob(t, cs, sharedTrainerJob("team-a", name, dir, sockets, steps))
	}
	kubetest.Eventually(t, 4*time.Minute, "the three shared trainers complete", func() (bool, error) {
		for _, name := range names {
			if ok, err := jobDone(cs, "team-a", name)(); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("stats %+v", g.stats())

	var busy [][3]float64 // from, to, job
	for i, name := range names {
		sum, n := trainerResult(t, dir, name)
		if sum != want || n != steps {
			t.Errorf("job %s: checksum %s after %d mini-batches; an uninterrupted run gives %s after %d", name, sum, n, want, steps)
		}
		checkLedger(t, dir, name)
		l, err := trainerpkg.ReadLedger(filepath.Join(dir, name+".ledger"))
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Spawns) != 1 {
			t.Errorf("job %s: %d processes (%v); a shared job is suspended in place, in one process", name, len(l.Spawns), l.Spawns)
		}
		for _, b := range l.Busy {
			busy = append(busy, [3]float64{b[0], b[1], float64(i)})
		}
		_, all, err := jobPods(cs, "team-a", name)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 {
			t.Errorf("job %s had %d pods; a shared job stays in its pod", name, len(all))
		}
		reasons := eventReasons(t, cs, "team-a", name)
		t.Logf("job %s: %d busy stretches, Events %v", name, len(l.Busy), reasons)
		if reasons["Suspended"] == 0 || reasons["Resumed"] == 0 {
			t.Errorf("job %s was never suspended and resumed (Events %v): the jobs did not take turns", name, reasons)
		}
	}
	// No two jobs computed at once. A stretch ends at the last mini-batch
	// boundary before a gap (the trainer's ledger), and a suspension is
	// acknowledged at a boundary before the next job is told to run: allow
	// one mini-batch (20 ms) of slack for the stretches' resolution.
	const slack = 0.03
	for i := range busy {
		for j := range busy {
			a, b := busy[i], busy[j]
			if a[2] < b[2] && a[0] < b[1]-slack && b[0] < a[1]-slack {
				t.Errorf("jobs %s and %s computed on the one GPU at once: [%.3f, %.3f] and [%.3f, %.3f]",
					names[int(a[2])], names[int(b[2])], a[0], a[1], b[0], b[1])
			}
		}
	}
}
