package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/gandiva-sched/gandiva/internal/kube"
	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
)

// helmConfig is Helm's action configuration for the plane's admin
// kubeconfig and namespace ns (as `helm -n ns` with that kubeconfig).
func helmConfig(t testing.TB, p *cplane.Plane, ns string) *action.Configuration {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = p.Kubeconfig
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(format string, v ...any) { t.Logf("helm: "+format, v...) }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// install installs the chart with Helm's install action, as `helm install
// gandiva deploy/helm/gandiva -n ns` does.
func install(t testing.TB, p *cplane.Plane, ns string, vals map[string]any) (*release.Release, error) {
	t.Helper()
	in := action.NewInstall(helmConfig(t, p, ns))
	in.ReleaseName = "gandiva"
	in.Namespace = ns
	in.Timeout = 2 * time.Minute
	return in.Run(loadChart(t), vals)
}

// upgrade upgrades the release, as `helm upgrade gandiva
// deploy/helm/gandiva -n ns` does.
func upgrade(t testing.TB, p *cplane.Plane, ns string, vals map[string]any) (*release.Release, error) {
	t.Helper()
	up := action.NewUpgrade(helmConfig(t, p, ns))
	up.Namespace = ns
	up.Timeout = 2 * time.Minute
	return up.Run("gandiva", loadChart(t), vals)
}

// schedulerOptions reads the Options of gandiva kube from the installed
// Deployment's container arguments, as the command would; an argument it
// does not know fails the test (a flag the chart gains must be run here).
func schedulerOptions(t testing.TB, args []string) kube.Options {
	t.Helper()
	if len(args) == 0 || args[0] != "kube" {
		t.Fatalf("the Deployment runs %v, not gandiva kube", args)
	}
	var o kube.Options
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "--policy":
			o.Policy = v
		case "--namespace":
			o.Namespace = v
		case "--ui-listen":
			// the dashboard's rights (TokenReview, SubjectAccessReview)
			// are internal/kube's tests'; it is not served here
		default:
			t.Fatalf("the Deployment passes %s, which this test does not run", a)
		}
	}
	return o
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// The chart installed with Helm's install action on a local control plane
// (its CRDs, RBAC, admission policies, ConfigMap, Deployment, DaemonSet) is
// enough for gandiva kube to schedule a batch/v1 Job end to end: the
// scheduler runs in this process (the plane runs no containers) with the
// arguments of the chart's Deployment and the identity of the chart's
// service account, so with exactly the rights the chart gives it; the
// example Job (deploy/examples/job.yaml) is bound whole, runs and
// completes, and so does the example JobSet (deploy/examples/jobset.yaml),
// with the real JobSet controller beside the plane. Before that, an install into a release namespace without the
// label gandiva.io/system=true stops saying so; after it, the chart's
// admission policies hold a namespace's user, and helm upgrade changes
// the policy and removes the agent.
func TestHelmInstallSchedulesAJob(t *testing.T) {
	const ns = "gandiva-system"
	sa := "system:serviceaccount:" + ns + ":gandiva"
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true,
		Users: []cplane.User{{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}}})
	kubetest.StartControllers(t, p, kubetest.JobSetController)
	cs := kubetest.Client(t, p)
	ctx := context.Background()

	// the release namespace made by hand, unlabelled
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := install(t, p, ns, nil); err == nil || !strings.Contains(err.Error(), "namespace gandiva-system lacks the label gandiva.io/system=true") {
		t.Fatalf("installing into an unlabelled namespace: %v, want an error saying it lacks the label", err)
	}
	if sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{}); err != nil || len(sas.Items) > 1 { // (the namespace's default)
		t.Fatalf("the refused install left service accounts: %v %v", sas, err)
	}
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(`{"metadata":{"labels":{"gandiva.io/system":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	rel, err := install(t, p, ns, nil)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("release %s", rel.Info.Status)
	}
	t.Logf("release %s %s, revision %d", rel.Name, rel.Info.Status, rel.Version)

	// what it installed
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "gandiva-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Labels["app.kubernetes.io/managed-by"] != "Helm" || dep.Spec.Template.Spec.ServiceAccountName != "gandiva" {
		t.Fatalf("the Deployment: labels %v, service account %q", dep.Labels, dep.Spec.Template.Spec.ServiceAccountName)
	}
	if _, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "gandiva-agent", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("gandiva.io/v1alpha1"); err != nil {
		t.Fatalf("the chart's CRD gandivaqueues.gandiva.io: %v", err)
	}

	// the scheduler as the Deployment runs it, with its account's rights
	o := schedulerOptions(t, dep.Spec.Template.Spec.Containers[0].Args)
	if o.Namespace != ns {
		t.Fatalf("the Deployment's --namespace is %q, not the release namespace", o.Namespace)
	}
	stats := make(chan func() kube.Stats, 1)
	o.OnLeading = func(s *kube.Scheduler) {
		select {
		case stats <- s.Stats:
		default:
		}
	}
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
	lvl := slog.LevelInfo
	if os.Getenv("GANDIVA_KUBE_DEBUG") != "" {
		lvl = slog.LevelDebug
	}
	o.Log = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: lvl}))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- kube.Run(runCtx, p.UserConfig(sa), o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && runCtx.Err() == nil {
			t.Errorf("gandiva kube: %v", err)
		}
	})

	kubetest.Namespace(t, cs, "team-a")
	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 4})
	objs := decodeFile(t, "../examples/job.yaml")
	if len(objs) != 1 {
		t.Fatalf("deploy/examples/job.yaml: %d objects", len(objs))
	}
	job := objs[0].(*batchv1.Job)
	if _, err := cs.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := boundRunning(t, cs, job.Namespace, "job-name="+job.Name, "the example Job's 2 pods", int(*job.Spec.Parallelism))
	// the Job's end is played (kwok ends a pod given this annotation)
	endWell(t, cs, running)
	kubetest.Eventually(t, 90*time.Second, "the example Job complete", func() (bool, error) {
		j, err := cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue && c.Type == batchv1.JobFailed {
				return false, fmt.Errorf("the Job failed: %s %s", c.Reason, c.Message)
			}
			if c.Status == corev1.ConditionTrue && c.Type == batchv1.JobComplete {
				return true, nil
			}
		}
		return false, nil
	})
	kubetest.Eventually(t, 30*time.Second, "a Scheduled Event from gandiva", func() (bool, error) {
		evs, err := cs.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "Scheduled" && e.Source.Component == "gandiva" {
				return true, nil
			}
		}
		return false, nil
	})
	scheduleJobSet(t, p)
	select {
	case s := <-stats:
		if st := s(); st.Errors != 0 || st.Binds < 4 {
			t.Fatalf("gandiva kube with the chart's rights: %d binds, %d API calls failed (missing rights?)", st.Binds, st.Errors)
		}
	default:
		t.Fatal("gandiva kube never led")
	}

	// the chart's admission policies: a namespace's user may not write the
	// scheduler's annotation (the policy reaches the API server's admission
	// after a while)
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "forged", Annotations: map[string]string{"gandiva.io/assign": "{}"}},
		Spec: corev1.PodSpec{SchedulerName: "gandiva", Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubetest.GPU: resource.MustParse("1")}}}}}}
	kubetest.Eventually(t, 30*time.Second, "a pod made with gandiva.io/assign refused by the chart's policy gandiva-pods", func() (bool, error) {
		_, err := cs.CoreV1().Pods("team-a").Create(ctx, bad, metav1.CreateOptions{})
		if err == nil {
			if err := cs.CoreV1().Pods("team-a").Delete(ctx, bad.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
			return false, nil
		}
		return strings.Contains(err.Error(), "only gandiva (its scheduler and node agent) may write the annotations"), err
	})

	// helm upgrade with another policy and no agent: the Deployment runs
	// the new policy, the agent's DaemonSet is gone
	rel, err = upgrade(t, p, ns, map[string]any{"scheduler": map[string]any{"policy": "fjf"}, "agent": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if rel.Version != 2 || rel.Info.Status != release.StatusDeployed {
		t.Fatalf("upgraded release: revision %d, %s", rel.Version, rel.Info.Status)
	}
	dep, err = cs.AppsV1().Deployments(ns).Get(ctx, "gandiva-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := schedulerOptions(t, dep.Spec.Template.Spec.Containers[0].Args); o.Policy != "fjf" {
		t.Errorf("after the upgrade the Deployment runs policy %q, want fjf", o.Policy)
	}
	if _, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "gandiva-agent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after an upgrade with agent.enabled=false, the agent's DaemonSet: %v", err)
	}
}

// scheduleJobSet creates the example JobSet (deploy/examples/jobset.yaml)
// and waits until gandiva has bound its 2 pods whole, kwok runs them, they
// exit 0 (the test ends them) and the JobSet controller says it completed.
func scheduleJobSet(t *testing.T, p *cplane.Plane) {
	t.Helper()
	ctx := context.Background()
	cs := kubetest.Client(t, p)
	dc := kubetest.Dynamic(t, p)
	data, err := os.ReadFile("../examples/jobset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &js.Object); err != nil {
		t.Fatalf("deploy/examples/jobset.yaml: %v", err)
	}
	gvr := schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	if _, err := dc.Resource(gvr).Namespace(js.GetNamespace()).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := boundRunning(t, cs, js.GetNamespace(), "jobset.sigs.k8s.io/jobset-name="+js.GetName(), "the example JobSet's 2 pods", 2)
	got, err := dc.Resource(gvr).Namespace(js.GetNamespace()).Get(ctx, js.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.GetAnnotations()[kube.AnnState]; st != kube.StateRunning {
		t.Fatalf("the JobSet's %s is %q, want running", kube.AnnState, st)
	}
	endWell(t, cs, running)
	kubetest.Eventually(t, 90*time.Second, "the example JobSet Completed", func() (bool, error) {
		got, err := dc.Resource(gvr).Namespace(js.GetNamespace()).Get(ctx, js.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["status"] != "True" {
				continue
			}
			switch m["type"] {
			case "Failed":
				return false, fmt.Errorf("the JobSet failed: %v %v", m["reason"], m["message"])
			case "Completed":
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", conds)
	})
}

// decodeFile decodes a manifest of built-in kinds.
// boundRunning waits until want pods of namespace ns with the label
// selector sel, what names them, are bound and running, and returns them.
func boundRunning(t testing.TB, cs kubernetes.Interface, ns, sel, what string, want int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	kubetest.Eventually(t, 90*time.Second, what+" bound and running", func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err
		}
		running = running[:0]
		for _, p := range l.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			}
		}
		return len(running) == want, fmt.Errorf("%d of %d pods bound and running", len(running), len(l.Items))
	})
	return running
}

// endWell has kwok end the pods with exit code 0 (kubetest.AnnExit).
func endWell(t testing.TB, cs kubernetes.Interface, pods []corev1.Pod) {
	t.Helper()
	body := []byte(`{"metadata":{"annotations":{"` + kubetest.AnnExit + `":"0"}}}`)
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Patch(context.Background(), p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func decodeFile(t testing.TB, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeAll(string(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []any
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
	return out
}
