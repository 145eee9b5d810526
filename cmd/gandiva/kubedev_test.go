package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/kube/ctl"
)

// kube dev --workloads: an unknown kind, and a controller that is not
// built, are errors that say what to do, before any control plane starts.
func TestKubeDevWorkloadsFlag(t *testing.T) {
	t.Setenv("GANDIVA_KUBE_BIN", t.TempDir()) // nothing built
	for _, tc := range []struct{ arg, want string }{
		{"jobset,nope", `"nope" is no workload kind`},
		{"lws", "run scripts/kube-workloads"},
		{"pytorch", "the pytorch controller is not built"},
	} {
		cmd := newKubeDevCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"--workloads", tc.arg, "--kubeconfig-out", t.TempDir() + "/kc"})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kube dev --workloads %s: %v, want an error saying %q", tc.arg, err, tc.want)
		}
		if strings.Contains(out.String(), "control plane at") {
			t.Errorf("kube dev --workloads %s started a control plane:\n%s", tc.arg, out.String())
		}
	}
}

// Every kind kube dev --workloads all runs has the example kube dev
// names, and the file exists.
func TestKubeDevWorkloadsExamples(t *testing.T) {
	all, err := ctl.Workloads("all")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		ex, ok := devExamples[n]
		if !ok {
			t.Errorf("kube dev names no example for the %s controller", n)
			continue
		}
		if _, err := os.Stat(filepath.Join("../../deploy/examples", ex)); err != nil {
			t.Errorf("the %s controller's example: %v", n, err)
		}
	}
}
