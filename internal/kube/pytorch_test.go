package kube

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

// The tests of this file run examples/pytorch/ddp.py, a real
// torch.distributed (gloo, CPU) DDP training loop, as a 2-rank gang: an
// Indexed Job (completionMode Indexed, parallelism 2, schedulerName
// gandiva) whose pods the Kubelet stand-in plays as processes of this
// machine. Each pod's rank is its JOB_COMPLETION_INDEX (set by the Job
// controller); MASTER_ADDR, MASTER_PORT and WORLD_SIZE come from the pod
// template's env. They need a Python with torch (torchtest.Python:
// skipped without one, failed under CI=true).

// uninterruptedDDP runs ddp.py (script) with world ranks started by env
// (none when world is 1), outside Gandiva, and returns rank 0's result:
// what a gang that was suspended, moved or restored must end with. args
// are ddp.py's (without --out).
func uninterruptedDDP(t *testing.T, py, script string, world int, args ...string) torchtest.Result {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "result.json")
	// a rank that hangs must not hang the test
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := torchtest.Run(ctx, t, torchtest.Ranks{Python: py, Args: append([]string{script, "--out", out}, args...), Out: out,
		Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PYTHONDONTWRITEBYTECODE=1"}, World: world})
	if res.WorldSize != world || res.Restored || res.Start != 0 {
		t.Fatalf("uninterrupted ddp.py: result %+v, want world size %d, not restored, from step 0", res, world)
	}
	return res
}

// ddpArgs are ddp.py's arguments of the tests' gangs, but --out and
// --loss-log.
func ddpArgs(steps int, stepTime string) []string {
	return []string{"--steps", strconv.Itoa(steps), "--global-batch", "8", "--seed", "1",
		"--step-time", stepTime, "--device", "cpu", "--backend", "gloo"}
}

// ddpJob is a 2-rank ddp.py gang as an Indexed Job of two one-GPU pods,
// preemptible (its pod failure policy ignores disruptions), checkpointing
// to dir/NAME, its result in dir/NAME.json and its loss curve in
// dir/NAME.loss.
func ddpJob(ns, name, dir, script string, port, steps int, stepTime string) jobSpec {
	cmd := append([]string{"python", script}, ddpArgs(steps, stepTime)...)
	cmd = append(cmd, "--out", filepath.Join(dir, name+".json"), "--loss-log", filepath.Join(dir, name+".loss"))
	return jobSpec{ns: ns, name: name, pods: 2, gpus: 1, played: true, preemptible: true, grace: 120,
		command: cmd,
		env: []corev1.EnvVar{
			{Name: "WORLD_SIZE", Value: "2"},
			// every pod is a process of this machine; in a cluster this is
			// rank 0's pod by its hostname under a headless Service
			// (ddp-0.<service>: the Job's pod template's subdomain)
			{Name: "MASTER_ADDR", Value: "127.0.0.1"},
			{Name: "MASTER_PORT", Value: strconv.Itoa(port)},
			{Name: "GANDIVA_CHECKPOINT_DIR", Value: filepath.Join(dir, name)},
			{Name: "GANDIVA_RESTORE", Value: "1"},
			// a rank that dies or hangs stops its peers within this (not
			// after the default 300 s), inside the tests' waits
			{Name: "GANDIVA_GANG_TIMEOUT", Value: "120"},
			{Name: "PYTHONDONTWRITEBYTECODE", Value: "1"},
			{Name: "PYTHONUNBUFFERED", Value: "1"},
		}}
}

// sharedDDPJob is ddpJob in shared mode: gandiva.io/gpus 1 per pod, and
// the in-job client attached to its pod's node agent (as sharedTrainerJob).
func sharedDDPJob(ns, name, dir, sockets, script string, port, steps int, stepTime string) jobSpec {
	return attachShared(ddpJob(ns, name, dir, script, port, steps, stepTime), sockets)
}

// checkLossLog fails unless the loss log has one line for each mini-batch
// 1..n, in order (rank 0 logged every mini-batch once: no mini-batch of
// the gang was done twice across a suspension, none skipped), all with
// world size 2.
func checkLossLog(t testing.TB, path string, n int) {
	t.Helper()
	log := torchtest.ReadLossLog(t, path)
	for i, l := range log {
		if l.Step != i+1 || l.World != 2 {
			t.Fatalf("loss log line %d: step %d, world size %d; want step %d, world size 2 (%v)", i+1, l.Step, l.World, i+1, log)
		}
	}
	if len(log) != n {
		t.Fatalf("loss log: %d mini-batches, want %d", len(log), n)
	}
}

// jobProcesses returns the Kubelet's processes of a Job, in start order.
func jobProcesses(k *kubetest.Kubelet, job string) []*kubetest.Process {
	var out []*kubetest.Process
	for _, pr := range k.Processes() {
		if pr.Job == job {
			out = append(out, pr)
		}
	}
	return out
}

// Exclusive mode: a 2-rank ddp.py gang runs on two one-GPU nodes (the
// other two are held by a job that is not preemptible); a gang of higher
// priority (tiresias-l: it has attained no service) preempts it: Gandiva
// suspends the Job, both pods get SIGTERM, the gang checkpoints once (one
// payload, at one mini-batch) and both ranks exit 143. When the other
// job ends, the gang resumes on its nodes, restores, and trains to the
// end; its final weights are bit-identical to an uninterrupted 2-rank
// run's, and its loss log counts every mini-batch once.
func TestDDPGangExclusiveSuspendResume(t *testing.T) {
	py := torchtest.Python(t)
	script := torchtest.Script(t, "../..")
	const steps = 400 // 50 ms each: 20 s of mini-batches
	want := uninterruptedDDP(t, py, script, 2, ddpArgs(steps, "0")...)

	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	kubelet := kubetest.StartKubelet(t, cs, map[string]string{"python": py})
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 4, GPUs: 1})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	t.Cleanup(func() {
		if t.Failed() {
			dumpJobs(t, cs, "team-a")
			for _, name := range []string{"ddp", "hold", "urgent"} {
				if v, err := Describe(ctx, cs, "team-a", name); err == nil {
					t.Logf("job %s: %s: %s", name, v.State, v.Reason)
				}
			}
			t.Logf("processes of ddp:\n%s", kubetest.LogTails(jobProcesses(kubelet, "ddp")))
		}
	})
	runGandiva(t, p, Options{Policy: "tiresias-l:limits=1/100000"})
	dir := t.TempDir()
	// a job that is not preemptible (no pod failure policy) holds two
	// nodes; the gang gets the other two
	createJob(t, cs, jobSpec{ns: "team-a", name: "hold", pods: 2, gpus: 1})
	kubetest.Eventually(t, time.Minute, "job hold running", func() (bool, error) {
		return boundCount(t, cs, "team-a", "hold") == 2, nil
	})
	createJob(t, cs, ddpJob("team-a", "ddp", dir, script, torchtest.FreePort(t), steps, "0.05"))
	// the gang trains (rank 0 logs its mini-batches) on the other two nodes
	kubetest.Eventually(t, 3*time.Minute, "the gang's first mini-batches", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(dir, "ddp.loss"))
		return err == nil && strings.Count(string(b), "\n") >= 10, nil
	})
	first := jobProcesses(kubelet, "ddp")
	if len(first) != 2 {
		t.Fatalf("%d processes of the gang, want 2 (one per rank)", len(first))
	}
	// a new gang in the top queue takes the gang's nodes
	createJob(t, cs, jobSpec{ns: "team-a", name: "urgent", pods: 2, gpus: 1})
	kubetest.Eventually(t, 2*time.Minute, "both ranks checkpointed and exited", func() (bool, error) {
		for _, pr := range jobProcesses(kubelet, "ddp")[:2] {
			if pr.End.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	first = jobProcesses(kubelet, "ddp")[:2]
	for _, pr := range first {
		if pr.Exit != 143 {
			t.Fatalf("rank %s exited %d on suspension, want 143 (checkpointed after SIGTERM)\n%s", pr.Pod, pr.Exit, kubetest.LogTails(first))
		}
	}
	meta, f, err := protocol.ReadCheckpoint(filepath.Join(dir, "ddp"))
	if err != nil {
		t.Fatalf("the gang's checkpoint: %v", err)
	}
	f.Close()
	if meta.Done <= 0 || meta.Done >= steps {
		t.Fatalf("the gang's checkpoint is at mini-batch %d of %d", meta.Done, steps)
	}
	payloads, _ := filepath.Glob(filepath.Join(dir, "ddp", "ckpt-*"))
	if len(payloads) != 1 {
		t.Fatalf("%d checkpoint payloads %v after the suspension, want 1 (one checkpoint for the gang)", len(payloads), payloads)
	}
	// job hold ends: the gang resumes on its nodes
	holdNodes := map[string]bool{}
	bound, _, err := jobPods(cs, "team-a", "hold")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bound {
		holdNodes[p.Spec.NodeName] = true
	}
	finishPods(t, cs, "team-a", "hold")
	kubetest.Eventually(t, 4*time.Minute, "the gang complete", jobDone(cs, "team-a", "ddp"))

	all := jobProcesses(kubelet, "ddp")
	if len(all) != 4 {
		t.Fatalf("%d processes of the gang, want 4 (2 ranks, suspended once)\n%s", len(all), kubetest.LogTails(all))
	}
	firstNodes := []string{all[0].Node, all[1].Node}
	for _, pr := range all[2:] {
		if pr.Exit != 0 {
			t.Fatalf("resumed rank %s exited %d\n%s", pr.Pod, pr.Exit, kubetest.LogTails(all))
		}
		if slices.Contains(firstNodes, pr.Node) || !holdNodes[pr.Node] {
			t.Errorf("rank %s resumed on %s; the gang ran on %v before, job hold's nodes %v were freed", pr.Pod, pr.Node, firstNodes, holdNodes)
		}
	}
	res := torchtest.ReadResult(t, filepath.Join(dir, "ddp.json"))
	t.Logf("checkpoint at mini-batch %d; result %+v; uninterrupted %s", meta.Done, res, want.Checksum)
	if !res.Restored || res.Start != int(meta.Done) || res.WorldSize != 2 || res.Steps != steps {
		t.Errorf("result %+v: want restored from mini-batch %d, world size 2, %d steps", res, meta.Done, steps)
	}
	if res.Checksum != want.Checksum {
		t.Errorf("checksum %s after a suspension by checkpoint and a resumption elsewhere; an uninterrupted 2-rank run gives %s", res.Checksum, want.Checksum)
	}
	checkLossLog(t, filepath.Join(dir, "ddp.loss"), steps)
}

// Shared mode: a 2-rank ddp.py gang (two pods of gandiva.io/gpus 1) and
// a trainer of 2 GPUs on one shared node of 2 GPUs, time-sliced by
// `gandiva kube` under the gandiva policy through the real node agent:
// each rank's in-job client is attached to its pod's agent
// (GANDIVA_AGENT_SOCKET), and the gang is suspended in place (its state
// in host memory, its process group kept) and resumed several times. Each
// rank is one process from start to end; both jobs are suspended and
// resumed; the gang's final weights are bit-identical to an uninterrupted
// 2-rank run's, the trainer's checksum to its uninterrupted run's.
func TestDDPGangSharedTimeSliced(t *testing.T) {
	py := torchtest.Python(t)
	script := torchtest.Script(t, "../..")
	const steps = 120
	want := uninterruptedDDP(t, py, script, 2, ddpArgs(steps, "0")...)
	const tsteps = 300 // 20 ms each: 6 s of mini-batches
	wantT := kubetest.Uninterrupted(t, "-steps", strconv.Itoa(tsteps), "-step-time", "0s", "-dim", "256", "-seed", "7")

	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	nodes := kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 2, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	kubelet := kubetest.StartKubelet(t, cs, map[string]string{"python": py, "trainer": kubetest.Trainer(t)})
	sockets := startNodeAgent(t, cs, nodes[0])
	t.Cleanup(func() {
		if t.Failed() {
			dumpJobs(t, cs, "team-a")
			t.Logf("processes of ddp:\n%s", kubetest.LogTails(jobProcesses(kubelet, "ddp")))
		}
	})
	g := runGandiva(t, p, Options{Policy: "gandiva:quantum=2;pack=false;migrate=false"})
	dir := t.TempDir()
	createJob(t, cs, sharedDDPJob("team-a", "ddp", dir, sockets, script, torchtest.FreePort(t), steps, "0.05"))
	tj := sharedTrainerJob("team-a", "t", dir, sockets, tsteps)
	tj.gpus = 2
	createJob(t, cs, tj)
	// what the agent acknowledged of the gang's suspensions: the
	// mini-batch at which each rank stopped, by assignment generation
	stops := map[int64]map[string]int64{}
	kubetest.Eventually(t, 5*time.Minute, "the gang and the trainer complete", func() (bool, error) {
		l, err := cs.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{LabelSelector: "job-name=ddp"})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			st, err := shared.ParseStatus(p.Annotations[shared.AnnStatus])
			if err == nil && st.State == shared.StatusSuspended && st.Done > 0 {
				if stops[st.Gen] == nil {
					stops[st.Gen] = map[string]int64{}
				}
				stops[st.Gen][p.Name] = st.Done
			}
		}
		for _, name := range []string{"ddp", "t"} {
			if ok, err := jobDone(cs, "team-a", name)(); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("stats %+v", g.stats())

	prs := jobProcesses(kubelet, "ddp")
	if len(prs) != 2 {
		t.Fatalf("%d processes of the gang, want 2: a shared gang is suspended in place, one process per rank\n%s", len(prs), kubetest.LogTails(prs))
	}
	_, pods, err := jobPods(cs, "team-a", "ddp")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Errorf("the gang had %d pods; a shared gang stays in its 2 pods", len(pods))
	}
	// the gang was suspended in mid-training, both ranks at the same
	// mini-batch (the ranks agree at each boundary)
	mid := 0
	for gen, at := range stops {
		if len(at) != 2 {
			continue
		}
		var done []int64
		for _, d := range at {
			done = append(done, d)
		}
		if done[0] != done[1] {
			t.Errorf("suspension %d: the ranks stopped at mini-batches %v, want the same", gen, at)
		}
		if done[0] < steps {
			mid++
		}
	}
	t.Logf("suspensions acknowledged by both ranks in mid-training: %d (%v)", mid, stops)
	if mid == 0 {
		t.Errorf("the gang was never seen suspended in mid-training by both ranks' agent (%v)", stops)
	}
	for _, name := range []string{"ddp", "t"} {
		reasons := eventReasons(t, cs, "team-a", name)
		t.Logf("job %s: Events %v", name, reasons)
		if reasons["Suspended"] == 0 || reasons["Resumed"] == 0 {
			t.Errorf("job %s was never suspended and resumed (Events %v): the jobs did not take turns", name, reasons)
		}
	}
	res := torchtest.ReadResult(t, filepath.Join(dir, "ddp.json"))
	t.Logf("result %+v; uninterrupted %s", res, want.Checksum)
	if res.Restored || res.Start != 0 || res.WorldSize != 2 || res.Steps != steps {
		t.Errorf("result %+v: want world size 2, %d steps from 0, never restored (suspended in place)", res, steps)
	}
	if res.Checksum != want.Checksum {
		t.Errorf("checksum %s after time-slicing in place; an uninterrupted 2-rank run gives %s", res.Checksum, want.Checksum)
	}
	checkLossLog(t, filepath.Join(dir, "ddp.loss"), steps)
	if sum, n := trainerResult(t, dir, "t"); sum != wantT || n != tsteps {
		t.Errorf("trainer: checksum %s after %d mini-batches; an uninterrupted run gives %s after %d", sum, n, wantT, tsteps)
	}
	checkLedger(t, dir, "t")
}
