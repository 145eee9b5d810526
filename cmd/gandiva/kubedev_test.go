package main

import (
	"bytes"
	"strings"
	"testing"
)

// kube dev --workloads: an unknown kind, and a controller that is not
// built, are errors that say what to do, before any control plane starts.
func TestKubeDevWorkloadsFlag(t *testing.T) {
	t.Setenv("GANDIVA_KUBE_BIN", t.TempDir()) // nothing built
	for _, tc := range []struct{ arg, want string }{
		{"jobset,nope", `"nope" is no workload kind`},
		{"lws", "run scripts/kube-workloads"},
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
