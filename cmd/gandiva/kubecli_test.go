package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

// jobs, status and explain take --kube; without it they still ask the
// server; NAMESPACE/NAME and --namespace name a job.
func TestKubeFlags(t *testing.T) {
	var jobs, status, explain bool
	for _, c := range clientCmds() {
		switch c.Name() {
		case "jobs", "status", "explain":
			if c.Flags().Lookup("kube") == nil || c.Flags().Lookup("kubeconfig") == nil || c.Flags().Lookup("namespace") == nil {
				t.Errorf("%s has no --kube, --kubeconfig or --namespace", c.Name())
			}
			jobs, status, explain = jobs || c.Name() == "jobs", status || c.Name() == "status", explain || c.Name() == "explain"
		}
	}
	if !jobs || !status || !explain {
		t.Fatal("a client command is missing")
	}
	k := &kubeClient{ns: "team-a"}
	if ns, n := k.job("team-b/resnet"); ns != "team-b" || n != "resnet" {
		t.Errorf("team-b/resnet: %s %s", ns, n)
	}
	if ns, n := k.job("resnet"); ns != "team-a" || n != "resnet" {
		t.Errorf("resnet with -n team-a: %s %s", ns, n)
	}
	// no --namespace: the kubeconfig context's, else default
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	conf := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: x, user: u, namespace: team-c}\n" +
		"clusters:\n- name: x\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: t}\n"
	if err := os.WriteFile(kc, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if ns, _ := (&kubeClient{kubeconfig: kc}).job("resnet"); ns != "team-c" {
		t.Errorf("kubeconfig context's namespace team-c: got %s", ns)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	if ns, _ := (&kubeClient{}).job("resnet"); ns != "default" {
		t.Errorf("no namespace anywhere: %s", ns)
	}
}

func TestKubePrint(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	views := []kube.JobView{
		{Namespace: "team-a", Name: "a", Kind: "Job", Created: now.Add(-time.Minute), GPUs: 4, Gang: 2, PodGPUs: 2, State: "running", Placement: "gpu-0=4",
			Pods: []kube.PodView{{Name: "a-0", Node: "gpu-0", Phase: "Running"}, {Name: "a-1", Node: "gpu-0", Phase: "Running"}}},
		{Namespace: "team-a", Name: "b", Kind: "Job", Created: now.Add(-time.Second), GPUs: 8, Gang: 1, PodGPUs: 8, State: "pending",
			Reason: "queued: needs 8 GPUs, 4 free ...: place 1 of 1 waiting", Pods: []kube.PodView{{Name: "b-0", Phase: "Pending"}}},
	}
	var buf bytes.Buffer
	if err := printKubeJobs(&buf, views, now); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"NAMESPACE", "team-a     a     Job   4     running  gpu-0=4  1m0s", "place 1 of 1 waiting"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs --kube:\n%s\nwant %q", out, want)
		}
	}
	buf.Reset()
	printKubeExplain(&buf, views[1])
	if out := buf.String(); !strings.Contains(out, "team-a/b: queued: needs 8 GPUs") || !strings.Contains(out, "1 of 1 pending") {
		t.Errorf("explain --kube:\n%s", out)
	}
	buf.Reset()
	printKubeExplain(&buf, views[0])
	if out := buf.String(); !strings.Contains(out, "not waiting: running on gpu-0=4") {
		t.Errorf("explain --kube of a running job:\n%s", out)
	}
	// a shared job suspended in place: its pods' GPUs, assignments and
	// what their agent reported
	sh := kube.JobView{Namespace: "team-a", Name: "s", Kind: "Job", GPUs: 1, Gang: 1, PodGPUs: 1, State: "suspended", Placement: "shared-0=1", Shared: true,
		Pods: []kube.PodView{{Name: "s-0", Node: "shared-0", Phase: "Running", GPUs: []int{0}, Assign: "suspended", AssignGen: 3,
			Agent: "suspended", AgentGen: 3, Done: 120, IterTime: 0.25}}}
	buf.Reset()
	printKubeStatus(&buf, sh)
	for _, want := range []string{"team-a/s (Job): suspended", "mode:    shared", "s-0  shared-0  Running  gpus [0]  assigned suspended (gen 3)  agent suspended (gen 3, 120 mini-batches, 0.250 s each)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("status --kube of a shared job:\n%s\nwant %q", buf.String(), want)
		}
	}
}
