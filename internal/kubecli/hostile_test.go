package kubecli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/kube"
)

// What a pod's owner or whoever may write Events controls (annotations,
// Event messages, a node's labels) reaches the terminal of whoever runs
// kubectl gandiva: its escape sequences, CR and bidi overrides are shown
// inert, one table row a line.
func TestPrintHostile(t *testing.T) {
	const bad = "x\x1b]0;pwned\a\x1b[2J\r\u202eevil\nrow"
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	v := kube.JobView{Namespace: "team-a", Name: "a" + bad, Kind: "JobSet" + bad, Created: now.Add(-time.Minute), GPUs: 2, Gang: 2, PodGPUs: 1,
		State: "pending" + bad, Placement: "n=2" + bad, Reason: "queued" + bad, ETA: "soon" + bad, Shared: true,
		Pods:   []kube.PodView{{Name: "p" + bad, Node: "n" + bad, Phase: "Running" + bad, Assign: "0" + bad, Agent: "ok" + bad, AgentError: "e" + bad, GPUs: []int{0}}},
		Events: []kube.EventView{{At: now, Object: "o" + bad, Type: "Normal", Reason: "r" + bad, Message: "m" + bad}}}
	var buf bytes.Buffer
	if err := PrintJobs(&buf, []kube.JobView{v}, now); err != nil {
		t.Fatal(err)
	}
	PrintStatus(&buf, v)
	PrintExplain(&buf, v)
	v.State = "running" + bad
	PrintExplain(&buf, v)
	if err := PrintNodes(&buf, []kube.NodeView{{Name: "n" + bad, Status: "up", GPUType: "a100" + bad, GPUs: 8}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, c := range []string{"\x1b", "\a", "\r", "\u202e", "\nrow"} {
		if strings.Contains(out, c) {
			t.Errorf("output holds %q:\n%s", c, out)
		}
	}
	if !strings.Contains(out, `\x1b]0;pwned`) || !strings.Contains(out, `\u202e`) {
		t.Errorf("the hostile strings are not shown escaped:\n%s", out)
	}
}
