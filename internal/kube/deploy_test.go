package kube

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/kube/kubetest"
	"github.com/gandiva-sched/gandiva/internal/kube/shared"
)

// objects decodes a multi-document manifest.
func objects(t testing.TB, path string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

// apply creates the objects (dry-run: only validated by the API server).
func apply(t testing.TB, cs kubernetes.Interface, objs []runtime.Object, dryRun bool) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		var err error
		switch x := o.(type) {
		case *corev1.Namespace:
			_, err = cs.CoreV1().Namespaces().Create(ctx, x, opts)
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(x.Namespace).Create(ctx, x, opts)
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(x.Namespace).Create(ctx, x, opts)
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Create(ctx, x, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, x, opts)
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(x.Namespace).Create(ctx, x, opts)
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(x.Namespace).Create(ctx, x, opts)
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(x.Namespace).Create(ctx, x, opts)
		case *batchv1.Job:
			_, err = cs.BatchV1().Jobs(x.Namespace).Create(ctx, x, opts)
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, x, opts)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, x, opts)
		default:
			t.Fatalf("apply: unexpected %T", o)
		}
		if err != nil {
			t.Fatalf("applying %T: %v", o, err)
		}
	}
}

// The manifests of deploy/ are valid (the API server accepts them, dry
// run), and `gandiva kube` runs with exactly the rights deploy/base/rbac.yaml
// gives its service account: it schedules a plain-pod gang whose size comes
// from a scheduler-plugins PodGroup (none bound until all its pods exist),
// honours node selectors and taints, and tells a waiting job why.
func TestDeployRBACPodGroupsConstraints(t *testing.T) {
	t.Parallel() // each has a control plane of its own; they mostly wait
	sa := "system:serviceaccount:gandiva-system:gandiva"
	sa2 := "system:serviceaccount:gandiva-two:gandiva" // an install in another namespace
	p := kubetest.Start(t, cplane.Options{Kwok: true, Controllers: true,
		Users: []cplane.User{{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gandiva-system"}},
			{Name: sa2, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gandiva-two"}}}})
	cs := kubetest.Client(t, p)
	ctx := context.Background()
	base := "../../deploy/base"
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "settings.yaml"} {
		apply(t, cs, objects(t, filepath.Join(base, f)), false)
	}
	var crds []string
	kz, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(kz), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok && strings.HasSuffix(f, ".yaml") {
			if strings.HasPrefix(f, "crds/") {
				crds = append(crds, filepath.Join(base, f)) // (installed below)
				continue
			}
			objects(t, filepath.Join(base, f)) // every resource decodes
		}
	}
	kubetest.Namespace(t, cs, "team-a")
	apply(t, cs, objects(t, filepath.Join(base, "deployment.yaml")), true)
	apply(t, cs, objects(t, "../../deploy/examples/job.yaml"), true)

	// a PodGroup CRD as scheduler-plugins installs it (the schema is not ours to check)
	dyn, err := dynamic.NewForConfig(p.Config())
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "podgroups.scheduling.x-k8s.io"},
		"spec": map[string]any{
			"group": "scheduling.x-k8s.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		}}}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range crds {
		installCRD(t, dyn, f) // deploy/base's own CRDs (GandivaQueue)
	}
	pgGVR := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "pg", "namespace": "team-a"},
		"spec":     map[string]any{"minMember": int64(3)}}}
	kubetest.Eventually(t, 30*time.Second, "the PodGroup created", func() (bool, error) {
		_, err := dyn.Resource(pgGVR).Namespace("team-a").Create(ctx, pg, metav1.CreateOptions{})
		return err == nil, err
	})

	kubetest.AddNodes(t, cs, kubetest.Nodes{Count: 2, GPUs: 4})
	kubetest.AddNodes(t, cs, kubetest.Nodes{First: 2, Count: 1, GPUs: 4, Labels: map[string]string{"pool": "ml"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}})

	// gandiva kube with the service account's token: least privilege
	saCfg := p.UserConfig(sa)
	g := runGandivaConfig(t, saCfg, Options{Policy: "fjf"})

	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name,
			Labels: map[string]string{LabelJob: "g", "scheduling.x-k8s.io/pod-group": "pg"}},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{GPU: resource.MustParse("1")}}}}}}
	}
	bound := func(names ...string) int {
		n := 0
		for _, name := range names {
			p, err := cs.CoreV1().Pods("team-a").Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.Spec.NodeName != "" {
				n++
			}
		}
		return n
	}
	for _, name := range []string{"g0", "g1"} {
		if _, err := cs.CoreV1().Pods("team-a").Create(ctx, pod(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	if n := bound("g0", "g1"); n != 0 {
		t.Fatalf("%d pods of a gang of 3 bound before its third pod exists", n)
	}
	if _, err := cs.CoreV1().Pods("team-a").Create(ctx, pod("g2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the plain-pod gang bound", func() (bool, error) {
		return bound("g0", "g1", "g2") == 3, nil
	})
	for _, name := range []string{"g0", "g1", "g2"} {
		p, _ := cs.CoreV1().Pods("team-a").Get(ctx, name, metav1.GetOptions{})
		if p.Spec.NodeName == "gpu-2" {
			t.Fatalf("pod %s on the tainted node gpu-2 without a toleration", name)
		}
	}

	// a Job for the ml pool goes to gpu-2; one that asks for more GPUs
	// than the pool has waits, and says why
	createJob(t, cs, jobSpec{ns: "team-a", name: "ml", pods: 2, gpus: 2, selector: map[string]string{"pool": "ml"},
		tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}})
	kubetest.Eventually(t, 60*time.Second, "job ml bound on gpu-2", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "ml")
		if len(b) != 2 {
			return false, err
		}
		for _, p := range b {
			if p.Spec.NodeName != "gpu-2" {
				return false, nil
			}
		}
		return true, nil
	})
	createJob(t, cs, jobSpec{ns: "team-a", name: "big", pods: 3, gpus: 4})
	kubetest.Eventually(t, 60*time.Second, "job big's pending pods say why they wait", func() (bool, error) {
		_, all, err := jobPods(cs, "team-a", "big")
		if len(all) != 3 {
			return false, err
		}
		for _, p := range all {
			c := podCondition(&p, corev1.PodScheduled)
			if p.Spec.NodeName != "" || c == nil || !strings.Contains(c.Message, "Gandiva: ") {
				return false, nil
			}
		}
		t.Logf("pod %s: PodScheduled=False: %s", all[0].Name, podCondition(&all[0], corev1.PodScheduled).Message)
		return true, nil
	})
	kubetest.Eventually(t, 30*time.Second, "Events on the Jobs", func() (bool, error) {
		evs, err := cs.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var started, waiting, scheduled bool
		for _, e := range evs.Items {
			switch {
			case e.InvolvedObject.Name == "ml" && e.Reason == "Started":
				started = true
			case e.InvolvedObject.Name == "big" && e.Reason == "Waiting":
				if !waiting {
					t.Logf("event on job big: %s: %s", e.Reason, e.Message)
				}
				waiting = true
			case e.InvolvedObject.Kind == "Pod" && e.Reason == "Scheduled" && e.Source.Component == "gandiva":
				scheduled = true
			}
		}
		return started && waiting && scheduled, nil
	})

	// shared mode with the same rights: the reservation pod, a shared job
	// bound with its assignment (the test's agent harness acknowledges)
	sh := kubetest.AddNodes(t, cs, kubetest.Nodes{Prefix: "shared-", Count: 1, GPUs: 2, Labels: map[string]string{shared.LabelSharedNode: "true"}})[0]
	startAgentHarness(t, cs, 1<<40, 10, false)
	createJob(t, cs, jobSpec{ns: "team-a", name: "s", pods: 1, gpus: 1, shared: true})
	var spod corev1.Pod
	kubetest.Eventually(t, 60*time.Second, "shared job s bound on "+sh+" with its assignment, acknowledged", func() (bool, error) {
		b, _, err := jobPods(cs, "team-a", "s")
		if len(b) != 1 || reservation(t, cs, sh) == nil {
			return false, err
		}
		spod = b[0]
		st, ok := statusOf(&b[0])
		return b[0].Spec.NodeName == sh && ok && st.State == shared.StatusRunning, nil
	})
	// the admission policy: the scheduler's account may change a pod's
	// gandiva.io/assign and gandiva.io/eta (what it shows users) and
	// nothing else
	sacs, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		patch, want string
		sub         []string
	}{
		{`{"spec":{"activeDeadlineSeconds":5}}`, "may not change a pod's spec", nil},
		{`{"metadata":{"labels":{"x":"y"}}}`, "may not change a pod's labels", nil},
		{`{"metadata":{"annotations":{"` + shared.AnnStatus + `":"{}"}}}`, "may change no annotation of a pod but gandiva.io/assign and gandiva.io/eta", nil},
		{`{"metadata":{"annotations":{"other":"x"}}}`, "may change no annotation of a pod but gandiva.io/assign and gandiva.io/eta", nil},
		// (metadata changes through pods/status, which it may patch for its conditions)
		{`{"metadata":{"annotations":{"` + shared.AnnStatus + `":"{}"}}}`, "may change no annotation of a pod but gandiva.io/assign and gandiva.io/eta", []string{"status"}},
		{`{"metadata":{"labels":{"x":"y"}}}`, "may not change a pod's labels", []string{"status"}},
	} {
		_, err := sacs.CoreV1().Pods("team-a").Patch(ctx, spod.Name, types.MergePatchType, []byte(c.patch), metav1.PatchOptions{}, c.sub...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("the scheduler's account patching %s %v: %v, want a denial saying %q", c.patch, c.sub, err, c.want)
		}
	}
	// the same account installed in another namespace (kustomize's
	// namespace: the policy's match names no namespace) is held alike
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gandiva-two"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gandiva-scheduler"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: sa2}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sacs2, err := kubernetes.NewForConfig(p.UserConfig(sa2))
	if err != nil {
		t.Fatal(err)
	}
	// (the new binding reaches the API server's authorizer after a while:
	// until then RBAC denies)
	kubetest.Eventually(t, 30*time.Second, "a label patched by the scheduler's account of gandiva-two denied by the admission policy", func() (bool, error) {
		_, err := sacs2.CoreV1().Pods("team-a").Patch(ctx, spod.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		if err == nil {
			return false, fmt.Errorf("the scheduler's account of gandiva-two patched a label")
		}
		return strings.Contains(err.Error(), "may not change a pod's labels"), err
	})
	if _, err := sacs.CoreV1().Pods("team-a").Create(ctx, pod("intruder"), metav1.CreateOptions{}); err == nil {
		t.Error("the scheduler's account created a pod in team-a; it may create pods only in gandiva-system (reservations)")
	}
	if s := g.stats(); s.Errors != 0 {
		t.Fatalf("%d API calls failed (missing rights?)", s.Errors)
	}
}

// The scheduler's ClusterRole lets it list, watch and patch every workload
// kind it watches (Clients.Served asks for exactly these, and a TrainJob's
// informer reads its progress): a kind granted get and patch only stayed
// unread (TrainJobs did, found in review).
func TestDeployRBACCoversKinds(t *testing.T) {
	var role *rbacv1.ClusterRole
	for _, o := range objects(t, "../../deploy/base/rbac.yaml") {
		if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == "gandiva-scheduler" {
			role = r
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole gandiva-scheduler in deploy/base/rbac.yaml")
	}
	for _, gr := range []struct{ group, resource string }{
		{"batch", "jobs"}, {"jobset.x-k8s.io", "jobsets"}, {"ray.io", "rayjobs"},
		{"leaderworkerset.x-k8s.io", "leaderworkersets"}, {"trainer.kubeflow.org", "trainjobs"},
		{"kubeflow.org", "pytorchjobs"},
	} {
		for _, verb := range []string{"list", "watch", "patch"} {
			ok := false
			for _, r := range role.Rules {
				if slices.Contains(r.APIGroups, gr.group) && slices.Contains(r.Resources, gr.resource) && slices.Contains(r.Verbs, verb) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("the ClusterRole gandiva-scheduler may not %s %s.%s", verb, gr.resource, gr.group)
			}
		}
	}
}
