package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gandiva-sched/gandiva/client/protocol"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// The client's environment names are the contract's.
func TestEnvNamesMatchTheContract(t *testing.T) {
	for _, c := range [][2]string{{protocol.EnvAgentSocket, shared.EnvSocket}, {protocol.EnvPodUID, shared.EnvPodUID},
		{protocol.EnvPodName, shared.EnvPodName}, {protocol.EnvPodNamespace, shared.EnvPodNamespace}} {
		if c[0] != c[1] {
			t.Errorf("client/protocol says %s, internal/kube/shared %s", c[0], c[1])
		}
	}
}

func TestCheckCgroup(t *testing.T) {
	uid := types.UID("0d3f6c1a-2b4e-4f7a-9c1d-5e6f7a8b9c0d")
	for _, c := range []struct {
		cg string
		ok bool
	}{
		{"0::/kubepods/besteffort/pod0d3f6c1a-2b4e-4f7a-9c1d-5e6f7a8b9c0d/cri-containerd-abc\n", true},
		{"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d3f6c1a_2b4e_4f7a_9c1d_5e6f7a8b9c0d.slice/x.scope\n", true},
		{"0::/kubepods/besteffort/pod11111111-2b4e-4f7a-9c1d-5e6f7a8b9c0d/cri-containerd-abc\n", false},
		{"0::/user.slice/user-1000.slice/session-3.scope\n", true}, // no pod: accepted (documented)
	} {
		if err := checkCgroup(c.cg, 42, uid); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok=%v", c.cg, err, c.ok)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{SocketDir: "/x"}, "node"},
		{Options{Node: "n"}, "socket dir"},
		{Options{Node: "n", SocketDir: "rel"}, "absolute"},
		{Options{Node: "n", SocketDir: "/" + strings.Repeat("d", 80)}, "too long"},
		{Options{Node: "n", SocketDir: "/x", ReportEvery: -1}, "negative"},
	} {
		if err := c.o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.o, err, c.want)
		}
	}
}

// decode reads a manifest of deploy/ (documents separated by ---).
func decode(t *testing.T, path string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(doc, nil))) == 0 {
			continue
		}
		o, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, o)
	}
	return out
}

func create(t *testing.T, cs kubernetes.Interface, objs []runtime.Object, dryRun bool) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		var err error
		switch x := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, x, opts)
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, x, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, x, opts)
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, x, opts)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, x, opts)
		case *appsv1.DaemonSet:
			_, err = cs.AppsV1().DaemonSets(x.Namespace).Create(ctx, x, opts)
		case *batchv1.Job:
			_, err = cs.BatchV1().Jobs(x.Namespace).Create(ctx, x, opts)
		default:
			t.Fatalf("create: unexpected %T", o)
		}
		if err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
}

// agentClient returns a clientset with the agent's service account token,
// bound to a stand-in pod of the DaemonSet on node (so its token carries
// the node's name, as on a cluster).
func agentClient(t *testing.T, p *cplane.Plane, cs kubernetes.Interface, node string) kubernetes.Interface {
	return agentClientIn(t, p, cs, "gandiva-system", node)
}

// agentClientIn is agentClient for the agent's service account of
// namespace ns.
func agentClientIn(t *testing.T, p *cplane.Plane, cs kubernetes.Interface, ns, node string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	ap, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gandiva-agent-" + node, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "gandiva-agent",
			Containers: []corev1.Container{{Name: "agent", Image: "gandiva"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "gandiva-agent", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp,
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: ap.Name, UID: ap.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config()
	cfg.BearerToken = tr.Status.Token
	acs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return acs
}

// runAgent runs the agent until the test ends.
func runAgent(t *testing.T, cs kubernetes.Interface, o Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cs, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
}

func socketDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// sharedPod is a pod as deploy/examples/shared-job.yaml makes them, bound
// to node with the assignment already written (the test plays the
// scheduler), run by the stand-in kubelet. uidEnv, when set, replaces the
// value of GANDIVA_POD_UID (a pod that lies about who it is); the socket's
// mount always uses the pod's own UID unless mountUID is set.
func sharedPod(name, node, sockets, assign string, cmd []string, uidEnv, mountUID string) *corev1.Pod {
	uid := corev1.EnvVar{Name: "GANDIVA_POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}
	podName := corev1.EnvVar{Name: "GANDIVA_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	if uidEnv != "" {
		uid = corev1.EnvVar{Name: "GANDIVA_POD_UID", Value: uidEnv}
	}
	if mountUID != "" {
		podName = corev1.EnvVar{Name: "GANDIVA_POD_NAME", Value: "a"} // the whole lie: a's name too
	}
	mount := "$(MY_UID)"
	if mountUID != "" {
		mount = mountUID
	}
	ann := map[string]string{shared.AnnGPUs: "1"}
	if assign != "" {
		ann[shared.AnnAssign] = assign
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Annotations: ann,
			Labels: map[string]string{kubetest.LabelPlayed: "true"}},
		Spec: corev1.PodSpec{NodeName: node, SchedulerName: "gandiva", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "train", Image: "trainer", Command: cmd,
				Env: []corev1.EnvVar{
					{Name: "MY_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
					uid,
					podName,
					{Name: "GANDIVA_POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: "GANDIVA_AGENT_SOCKET", Value: "/run/gandiva/agent.sock"},
					{Name: "GANDIVA_REPORT_EVERY", Value: "0.05"},
					{Name: "GANDIVA_ATTACH_TIMEOUT", Value: "120"},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "gandiva-agent", MountPath: "/run/gandiva", SubPathExpr: mount}}}},
			Volumes: []corev1.Volume{{Name: "gandiva-agent", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: sockets}}}}}}
}

func status(t *testing.T, cs kubernetes.Interface, name string) (shared.Status, *corev1.Pod) {
	t.Helper()
	p, err := cs.CoreV1().Pods("team-a").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := p.Annotations[shared.AnnStatus]
	if !ok {
		return shared.Status{}, p
	}
	s, err := shared.ParseStatus(v)
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return s, p
}

func waitStatus(t *testing.T, cs kubernetes.Interface, name, what string, cond func(shared.Status, *corev1.Pod) bool) shared.Status {
	t.Helper()
	var last shared.Status
	kubetest.Eventually(t, 90*time.Second, "pod "+name+": "+what, func() (bool, error) {
		s, p := status(t, cs, name)
		last = s
		return cond(s, p), fmt.Errorf("last status %+v", s)
	})
	return last
}

func setAssign(t *testing.T, cs kubernetes.Interface, name string, a shared.Assign) {
	t.Helper()
	patchAnn(t, cs, name, shared.AnnAssign, a.String())
}

func patchAnn(t *testing.T, cs kubernetes.Interface, name, key, value string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if _, err := cs.CoreV1().Pods("team-a").Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func warning(t *testing.T, cs kubernetes.Interface, pod, reason, contains string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "Warning "+reason+" on pod "+pod, func() (bool, error) {
		l, err := cs.CoreV1().Events("team-a").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, e := range l.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, contains) {
				return true, nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, fmt.Errorf("events: %q", seen)
	})
}

func trainerResult(t *testing.T, path string) (sum, gpus string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no result: %v", err)
	}
	var r struct{ Checksum, GPUs string }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Checksum, r.GPUs
}

// The node agent against a real control plane, with exactly the rights of
// deploy/base/agent-rbac.yaml and agent-vap.yaml (its token bound to a pod
// on its node), a kwok node and the stand-in kubelet running the trainer;
// the test writes the assignments (it plays the scheduler). A shared pod
// starts with the GPUs of its assignment, is suspended, resumed, reports
// progress and finishes with the checksum of an uninterrupted run; a pod
// whose hello names another pod's UID, and a second process on a pod's
// socket, are refused; a bad assignment is a Failed status naming the
// field and a Warning Event, and a good one then starts the pod; a change
// of GPUs is Failed; a pod whose process never says hello is Failed at the
// client deadline. The agent can patch nothing but its annotation, and
// only on its node's pods.
func TestAgent(t *testing.T) {
	p := kubetest.Start(t, cplane.Options{Kwok: true})
	cs := kubetest.Client(t, p)
	kubetest.Namespace(t, cs, "team-a")
	kubetest.Namespace(t, cs, "gandiva-system")
	base := "../../../deploy/base"
	create(t, cs, decode(t, filepath.Join(base, "agent-rbac.yaml")), false)
	create(t, cs, decode(t, filepath.Join(base, "agent-vap.yaml")), false)
	create(t, cs, decode(t, filepath.Join(base, "agent-daemonset.yaml")), true)
	create(t, cs, decode(t, "../../../deploy/examples/shared-job.yaml"), true)
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 2, Labels: map[string]string{shared.LabelSharedNode: "true"}})
	programs := map[string]string{"trainer": kubetest.Trainer(t), "sleep": "/bin/sleep"}
	py, pyErr := exec.LookPath("python3")
	if pyErr == nil {
		programs["python3"] = py
	}
	kubetest.StartKubelet(t, cs, programs)
	ctx := context.Background()

	// the agents of gpu-0 and gpu-1, each with its own node-bound token
	acs0, acs1 := agentClient(t, p, cs, "gpu-0"), agentClient(t, p, cs, "gpu-1")
	sockets := socketDir(t)
	runAgent(t, acs0, Options{Node: "gpu-0", SocketDir: sockets, ReportEvery: 200 * time.Millisecond})
	runAgent(t, acs1, Options{Node: "gpu-1", SocketDir: sockets, ReportEvery: 200 * time.Millisecond, ClientDeadline: time.Second})

	dir := t.TempDir()
	args := []string{"-steps", "400", "-step-time", "5ms", "-dim", "64", "-seed", "7"}
	want := kubetest.Uninterrupted(t, "-steps", "400", "-step-time", "0s", "-dim", "64", "-seed", "7")
	train := func(name string) []string {
		return append([]string{"trainer", "-out", filepath.Join(dir, name+".json")}, args...)
	}

	// a: starts running on GPU 1, is suspended and resumed, finishes
	a, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("a", "gpu-0", sockets,
		shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{1}}.String(), train("a"), "", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, cs, "a", "running, ready, gen 1", func(s shared.Status, _ *corev1.Pod) bool {
		return s.Gen == 1 && s.State == shared.StatusRunning && s.Ready && s.Done > 0
	})
	if !shared.Equal(s.GPUs, []int{1}) || s.Error != "" {
		t.Fatalf("status %+v", s)
	}
	// progress is republished while it runs, with a mini-batch time
	first := s.Done
	s = waitStatus(t, cs, "a", "progress republished", func(s shared.Status, _ *corev1.Pod) bool {
		return s.Done > first && s.IterTime > 0
	})

	setAssign(t, cs, "a", shared.Assign{Gen: 2, State: shared.Suspended, GPUs: []int{1}})
	s = waitStatus(t, cs, "a", "suspended, gen 2", func(s shared.Status, _ *corev1.Pod) bool {
		return s.Gen == 2 && s.State == shared.StatusSuspended
	})
	if s.Done >= 400 {
		t.Fatalf("a finished before its suspension: %+v (make it longer)", s)
	}
	// b's hello names a's UID (on b's own socket): refused
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("b", "gpu-0", sockets,
		shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0}}.String(), train("b"), string(a.UID), ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warning(t, cs, "b", "Refused", "this socket is pod team-a/b's")
	// c mounts a's socket directory and claims a's UID while a is attached (suspended):
	// refused (on a real node its cgroup would give it away first); and a,
	// suspended, stays so

	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("c", "gpu-0", sockets,
		shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0}}.String(), train("c"), string(a.UID), string(a.UID)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warning(t, cs, "a", "Refused", "already has a connected process")
	for _, name := range []string{"b", "c"} {
		waitStatus(t, cs, name, "ended (refused)", func(_ shared.Status, p *corev1.Pod) bool {
			return p.Annotations[kubetest.AnnExit] == "1"
		})
	}

	if s2, _ := status(t, cs, "a"); s2.Done != s.Done || s2.State != shared.StatusSuspended {
		t.Fatalf("a moved while suspended: %+v, then %+v", s, s2)
	}
	setAssign(t, cs, "a", shared.Assign{Gen: 3, State: shared.Running, GPUs: []int{1}})
	waitStatus(t, cs, "a", "running again, gen 3", func(s shared.Status, _ *corev1.Pod) bool {
		return s.Gen == 3 && s.State == shared.StatusRunning
	})
	waitStatus(t, cs, "a", "finished", func(_ shared.Status, p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if sum, gpus := trainerResult(t, filepath.Join(dir, "a.json")); sum != want || gpus != "1" {
		t.Fatalf("a: checksum %s on GPUs %q, want %s on 1", sum, gpus, want)
	}

	// the Python client, attached the same way (examples/python/trainer.py,
	// same checksum as the Go trainer's)
	if pyErr != nil {
		t.Log("python3 is not installed: the Python client's part is skipped")
	} else {
		script, err := filepath.Abs("../../../examples/python/trainer.py")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("py", "gpu-0", sockets,
			shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0}}.String(),
			append([]string{"python3", script, "--out", filepath.Join(dir, "py.json")}, args...), "", ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, cs, "py", "running, ready", func(s shared.Status, _ *corev1.Pod) bool {
			return s.Gen == 1 && s.State == shared.StatusRunning && s.Ready && shared.Equal(s.GPUs, []int{0})
		})
		setAssign(t, cs, "py", shared.Assign{Gen: 2, State: shared.Suspended, GPUs: []int{0}})
		if s := waitStatus(t, cs, "py", "suspended", func(s shared.Status, _ *corev1.Pod) bool {
			return s.Gen == 2 && s.State == shared.StatusSuspended
		}); s.Done >= 400 {
			t.Fatalf("py finished before its suspension: %+v", s)
		}
		setAssign(t, cs, "py", shared.Assign{Gen: 3, State: shared.Running, GPUs: []int{0}})
		waitStatus(t, cs, "py", "finished", func(_ shared.Status, p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		if sum, _ := trainerResult(t, filepath.Join(dir, "py.json")); sum != want {
			t.Fatalf("py: checksum %s, want %s", sum, want)
		}
	}

	// d: a bad assignment (no GPUs) is Failed naming the field; its process
	// waits for a good one, which starts it
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("d", "gpu-0", sockets,
		`{"gen":1,"state":"running","gpus":[]}`, train("d"), "", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitStatus(t, cs, "d", "failed: bad assignment", func(s shared.Status, _ *corev1.Pod) bool { return s.State == shared.Failed })
	if !strings.Contains(s.Error, "gpus") {
		t.Fatalf("d: %+v, want an error naming gpus", s)
	}
	warning(t, cs, "d", "BadAssign", "gpus: at least one GPU")
	setAssign(t, cs, "d", shared.Assign{Gen: 2, State: shared.Suspended, GPUs: []int{0}})
	s = waitStatus(t, cs, "d", "held (warm start), gen 2", func(s shared.Status, _ *corev1.Pod) bool {
		return s.Gen == 2 && s.State == shared.StatusSuspended
	})
	if s.Done != 1 || s.Error != "" {
		t.Fatalf("d: %+v, want it held at its first boundary", s)
	}
	// a change of GPUs is not an assignment: Failed
	setAssign(t, cs, "d", shared.Assign{Gen: 3, State: shared.Running, GPUs: []int{1}})
	s = waitStatus(t, cs, "d", "failed: gpus changed", func(s shared.Status, _ *corev1.Pod) bool { return s.State == shared.Failed })
	if s.Gen != 3 || !strings.Contains(s.Error, "gpus changed from [0] to [1]") {
		t.Fatalf("d: %+v", s)
	}
	warning(t, cs, "d", "GPUsChanged", "move the job by a new pod")

	// e on gpu-1 (client deadline 1 s) never says hello
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("e", "gpu-1", sockets,
		shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0}}.String(), []string{"sleep", "600"}, "", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitStatus(t, cs, "e", "failed: no hello", func(s shared.Status, _ *corev1.Pod) bool { return s.State == shared.Failed })
	if !strings.Contains(s.Error, "no hello") || !strings.Contains(s.Error, "within 1s") {
		t.Fatalf("e: %+v", s)
	}
	warning(t, cs, "e", "NoClient", "no hello")

	// the agent acts on no assignment the scheduler could not have written
	// (more GPUs than the pod asks for), and serves no shared pod of
	// another scheduler (deploy/base/pods-vap.yaml keeps users from
	// writing either; this is the agent not trusting them if it is absent)
	g := sharedPod("g", "gpu-0", sockets, shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0}}.String(), []string{"sleep", "600"}, "", "")
	g.Spec.SchedulerName = "default-scheduler"
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, sharedPod("f", "gpu-0", sockets,
		shared.Assign{Gen: 1, State: shared.Running, GPUs: []int{0, 1}}.String(), []string{"sleep", "600"}, "", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitStatus(t, cs, "f", "failed: not an assignment of Gandiva's", func(s shared.Status, _ *corev1.Pod) bool { return s.State == shared.Failed })
	if !strings.Contains(s.Error, "2 GPUs [0 1], but the pod asks for 1") || len(s.GPUs) != 0 {
		t.Fatalf("f: %+v", s)
	}
	warning(t, cs, "f", "BadAssign", "not an assignment of Gandiva's")
	if gp, err := cs.CoreV1().Pods("team-a").Get(ctx, "g", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if v, ok := gp.Annotations[shared.AnnStatus]; ok {
		t.Fatalf("the agent served pod g of another scheduler: status %s", v)
	}

	// least privilege: the agent of gpu-0 may patch only its annotation,
	// and only on pods of gpu-0
	denied := func(acs kubernetes.Interface, pod string, patch map[string]any, what string) {
		t.Helper()
		body, _ := json.Marshal(patch)
		kubetest.Eventually(t, 30*time.Second, what+" denied", func() (bool, error) {
			_, err := acs.CoreV1().Pods("team-a").Patch(ctx, pod, types.MergePatchType, body, metav1.PatchOptions{})
			if err == nil {
				return false, fmt.Errorf("%s was allowed", what)
			}
			return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), err
		})
	}
	statusOnly := map[string]any{"metadata": map[string]any{"annotations": map[string]string{shared.AnnStatus: shared.Status{State: shared.Starting}.String()}}}
	denied(acs0, "e", statusOnly, "the status of a pod of another node")
	denied(acs0, "d", map[string]any{"metadata": map[string]any{"annotations": map[string]string{shared.AnnAssign: `{"gen":9}`}}}, "the assignment")
	denied(acs0, "d", map[string]any{"metadata": map[string]any{"labels": map[string]string{"x": "y"}}}, "a label")
	denied(acs0, "d", map[string]any{"spec": map[string]any{"activeDeadlineSeconds": 5}}, "the spec")
	// the agent's account installed in another namespace (kustomize's
	// namespace: the policy's match names no namespace) is held alike
	kubetest.Namespace(t, cs, "gandiva-two")
	if _, err := cs.CoreV1().ServiceAccounts("gandiva-two").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gandiva-agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gandiva-agent-two"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gandiva-agent"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "gandiva-two", Name: "gandiva-agent"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	acs2 := agentClientIn(t, p, cs, "gandiva-two", "gpu-0")
	label, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"x": "y"}}})
	kubetest.Eventually(t, 30*time.Second, "a label patched by the agent account of gandiva-two denied by the admission policy", func() (bool, error) {
		_, err := acs2.CoreV1().Pods("team-a").Patch(ctx, "d", types.MergePatchType, label, metav1.PatchOptions{})
		if err == nil {
			return false, fmt.Errorf("the agent account of gandiva-two patched a label")
		}
		return strings.Contains(err.Error(), "may change only the annotation"), err
	})
	body, _ := json.Marshal(statusOnly)
	if _, err := acs1.CoreV1().Pods("team-a").Patch(ctx, "e", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the agent of gpu-1 patching its own pod's status: %v", err)
	}
	if err := acs0.CoreV1().Pods("team-a").Delete(ctx, "d", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the agent deleting a pod: %v, want Forbidden", err)
	}
	if _, err := acs0.CoreV1().Secrets("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the agent listing Secrets: %v, want Forbidden", err)
	}
}
