package kubecli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

func TestPrint(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	views := []kube.JobView{
		{Namespace: "team-a", Name: "a", Kind: "Job", Created: now.Add(-time.Minute), GPUs: 4, Gang: 2, PodGPUs: 2, State: "running", Placement: "gpu-0=4",
			Pods: []kube.PodView{{Name: "a-0", Node: "gpu-0", Phase: "Running"}, {Name: "a-1", Node: "gpu-0", Phase: "Running"}}},
		{Namespace: "team-a", Name: "b", Kind: "Job", Created: now.Add(-time.Second), GPUs: 8, Gang: 1, PodGPUs: 8, State: "pending",
			Reason: "queued: needs 8 GPUs, 4 free ...: place 1 of 1 waiting", Pods: []kube.PodView{{Name: "b-0", Phase: "Pending"}}},
	}
	var buf bytes.Buffer
	if err := PrintJobs(&buf, views, now); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"NAMESPACE", "team-a     a     Job   4     running  gpu-0=4  1m0s", "place 1 of 1 waiting"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs --kube:\n%s\nwant %q", out, want)
		}
	}
	buf.Reset()
	PrintExplain(&buf, views[1])
	if out := buf.String(); !strings.Contains(out, "team-a/b: queued: needs 8 GPUs") || !strings.Contains(out, "1 of 1 pending") {
		t.Errorf("explain --kube:\n%s", out)
	}
	buf.Reset()
	PrintExplain(&buf, views[0])
	if out := buf.String(); !strings.Contains(out, "not waiting: running on gpu-0=4") {
		t.Errorf("explain --kube of a running job:\n%s", out)
	}
	// a shared job suspended in place: its pods' GPUs, assignments and
	// what their agent reported
	sh := kube.JobView{Namespace: "team-a", Name: "s", Kind: "Job", GPUs: 1, Gang: 1, PodGPUs: 1, State: "suspended", Placement: "shared-0=1", Shared: true,
		Pods: []kube.PodView{{Name: "s-0", Node: "shared-0", Phase: "Running", GPUs: []int{0}, Assign: "suspended", AssignGen: 3,
			Agent: "suspended", AgentGen: 3, Done: 120, IterTime: 0.25}}}
	buf.Reset()
	PrintStatus(&buf, sh)
	for _, want := range []string{"team-a/s (Job): suspended", "mode:    shared", "s-0  shared-0  Running  gpus [0]  assigned suspended (gen 3)  agent suspended (gen 3, 120 mini-batches, 0.250 s each)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("status --kube of a shared job:\n%s\nwant %q", buf.String(), want)
		}
	}
}

// explain shows a waiting workload's ETA (what the scheduler appends to
// its waiting reason) on a line of its own, and a running one's end.
func TestExplainETA(t *testing.T) {
	v := kube.JobView{Namespace: "team-a", Name: "b", Kind: "Job", State: "pending",
		Reason: "queued: needs 8 GPUs, 4 free: place 2 of 3 waiting; ETA: start ~17:52 UTC (p10–p90 17:40–18:55 UTC), end ~19:00 UTC"}
	var b bytes.Buffer
	PrintExplain(&b, v)
	want := "team-a/b: queued: needs 8 GPUs, 4 free: place 2 of 3 waiting\n  eta:   start ~17:52 UTC (p10–p90 17:40–18:55 UTC), end ~19:00 UTC\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("explain:\n%s\nwant %q", b.String(), want)
	}
	b.Reset()
	PrintExplain(&b, kube.JobView{Namespace: "team-a", Name: "r", Kind: "RayJob", State: "pending", Events: []kube.EventView{
		{Object: "RayJob/r", Type: "Warning", Reason: "NotSchedulable", Message: "Gandiva will not schedule it: its pods differ"}}})
	if want := "team-a/r: not scheduled: Gandiva will not schedule it: its pods differ\n"; !strings.Contains(b.String(), want) {
		t.Errorf("explain of a workload Gandiva refuses:\n%s\nwant %q", b.String(), want)
	}
	b.Reset()
	PrintExplain(&b, kube.JobView{Namespace: "team-a", Name: "a", State: "running", Placement: "gpu-0=4", ETA: "end ~18:00 UTC"})
	if want := "team-a/a: not waiting: running on gpu-0=4\n  eta:   end ~18:00 UTC"; !strings.Contains(b.String(), want) {
		t.Errorf("explain of a running job:\n%s\nwant %q", b.String(), want)
	}
}

func TestPrintQueuesNodes(t *testing.T) {
	var b bytes.Buffer
	err := PrintQueues(&b, kube.QueuesInfo{TotalGPUs: 16, Settings: "gandiva-system/gandiva-settings", SettingsErr: "not found",
		Queues: []kube.QueueView{{Namespace: "team-a", Tickets: 3, TicketsSet: true, Entitled: 0.75, Held: 8, Share: 0.5, Pending: 4, Running: 2, Waiting: 1},
			{Namespace: "team-b", Tickets: 1, Entitled: 0.25}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAMESPACE  TICKETS      ENTITLED  GPUS HELD  SHARE  GPUS PENDING  RUNNING  WAITING",
		"team-a     3            75%       8          50%    4             2        1",
		"team-b     1 (default)  25%", "gandiva-system/gandiva-settings: not found", "of the cluster's 16"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("queues:\n%s\nwant %q", b.String(), want)
		}
	}
	b.Reset()
	err = PrintNodes(&b, []kube.NodeView{{Name: "gpu-0", Status: "up", GPUType: "V100", GPUs: 8, Gandiva: 4, Others: 2, Free: 2},
		{Name: "shared-0", Status: "up", GPUType: "V100", GPUs: 4, Gandiva: 4, Shared: true, SharedPods: 3, Reservation: "holding"},
		{Name: "gpu-1", Status: "drained", GPUType: "V100", GPUs: 8}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NODE      STATUS   TYPE  GPUS  GANDIVA  OTHERS  FREE  SHARED        RESERVATION",
		"gpu-0     up       V100  8     4        2       2     -             -",
		"shared-0  up       V100  4     4        0       0     yes (3 pods)  holding",
		"gpu-1     drained  V100  8     0        0       0", "TOTAL                    20    8        2       2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("nodes:\n%s\nwant %q", b.String(), want)
		}
	}
}

// The flags mean what kubectl's do: --context picks a context of the
// kubeconfig, its namespace is the default, -n overrides it, -A lists all.
func TestFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	conf := `apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: cx, user: u, namespace: team-c}
- name: d
  context: {cluster: cy, user: u, namespace: team-d}
clusters:
- name: cx
  cluster: {server: "https://127.0.0.1:1"}
- name: cy
  cluster: {server: "https://127.0.0.2:2"}
users:
- name: u
  user: {token: t}
`
	if err := os.WriteFile(kc, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) *Flags {
		f := &Flags{}
		c := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		f.Bind(c)
		c.SetArgs(args)
		if err := c.Execute(); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := parse("--kubeconfig", kc)
	if ns := f.NS(true); ns != "team-c" {
		t.Errorf("the current context's namespace: %q", ns)
	}
	if cfg, err := f.Config(); err != nil || cfg.Host != "https://127.0.0.1:1" {
		t.Errorf("current context's server: %v %v", cfg, err)
	}
	f = parse("--kubeconfig", kc, "--context", "d")
	if ns := f.NS(true); ns != "team-d" {
		t.Errorf("--context d's namespace: %q", ns)
	}
	if cfg, err := f.Config(); err != nil || cfg.Host != "https://127.0.0.2:2" {
		t.Errorf("--context d's server: %v %v", cfg, err)
	}
	f = parse("--kubeconfig", kc, "-n", "team-x", "-A")
	if ns, all := f.NS(false), f.NS(true); ns != "team-x" || all != "" {
		t.Errorf("-n team-x -A: %q, all %q", ns, all)
	}
	if ns, name := f.Job("team-b/resnet"); ns != "team-b" || name != "resnet" {
		t.Errorf("team-b/resnet: %s %s", ns, name)
	}
	if ns, name := f.Job("resnet"); ns != "team-x" || name != "resnet" {
		t.Errorf("resnet -n team-x: %s %s", ns, name)
	}
	// $KUBECONFIG, as kubectl
	t.Setenv("KUBECONFIG", kc)
	if ns := parse().NS(false); ns != "team-c" {
		t.Errorf("$KUBECONFIG's context namespace: %q", ns)
	}
	if _, err := parse("--context", "nope").Config(); err == nil {
		t.Error("--context nope: no error")
	}
}

// The GandivaQueues print as a tree (children indented under their
// parent) before the namespaces; an invalid queue says why; every string
// of a queue's object is shown inertly.
func TestPrintQueueTree(t *testing.T) {
	var b bytes.Buffer
	err := PrintQueues(&b, kube.QueuesInfo{TotalGPUs: 8, Tree: []kube.GQueueView{
		{Name: "org", Tickets: 2, GPUs: 4, Share: 1, Entitlement: 8, Valid: "True"},
		{Name: "team-a", Parent: "org", Depth: 1, Tickets: 3, Namespaces: []string{"team-a", "team-x"}, Quota: map[string]int{"V100": 6, "A100": 2}, GPUs: 4, Share: 0.75, Entitlement: 6, Valid: "True"},
		{Name: "loop", Parent: "loop", Tickets: 1, Valid: "False", Why: "in a cycle\x1b[2J"}}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"QUEUE     TICKETS  NAMESPACES     QUOTA          GPUS  SHARE  ENTITLEMENT  VALID",
		"org       2        -              -              4     100%   8.0          True",
		"  team-a  3        team-a,team-x  A100=2,V100=6  4     75%    6.0          True",
		"loop      1        -              -              0     0%     0.0          False: in a cycle"} {
		if !strings.Contains(out, want) {
			t.Errorf("queues:\n%s\nwant %q", out, want)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape printed raw:\n%q", out)
	}
}
