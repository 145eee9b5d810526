package prereq

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

// group is a group of tests that need something of the machine.
type group struct {
	name, tests string
	// ready says whether the machine has what the group needs: what it
	// found, or why not.
	ready func() (string, error)
	// fix says how to get it.
	fix string
}

var groups = []group{
	{"browser tests", "internal/ui browser_test.go, internal/e2e TestDashboardOfTheDemo", chromium,
		"apt-get install chromium, or GANDIVA_CHROMIUM=/path/to/chromium"},
	{"Kubernetes tests", "internal/kube/..., deploy/helm TestHelmInstallSchedulesAJob (a local control plane)", kubeTools,
		"scripts/kube-tools"},
	{"PyTorch tests", "examples/pytorch, internal/kube pytorch_test.go, internal/e2e pytorch_test.go", torch,
		"apt-get install python3-torch (Debian's, at /usr/bin/python3), or GANDIVA_TORCH_PYTHON=/path/to/python"},
	{"Python client tests", "python/, internal/agent/jobproc python_test.go", python3,
		"install python3"},
	{"OS-account tests", "internal/agent/jobproc (jobs as nobody), cmd/gandiva TestSubmitChecksAsJobAccount, " +
		"internal/e2e TestIsolation (adds two accounts with useradd, removes them at its end)", root,
		"run the tests as root (CI does)"},
}

// chromium finds Chromium as internal/ui/uitest.Chromium does.
func chromium() (string, error) {
	for _, p := range []string{os.Getenv("GANDIVA_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("no Chromium ($GANDIVA_CHROMIUM, /usr/bin/chromium, chromium or chromium-browser on PATH)")
}

// kubeTools checks the control plane's binaries as kubetest.Start does.
func kubeTools() (string, error) {
	dir := cplane.BinDir()
	if err := cplane.Check(dir); err != nil {
		return "", err
	}
	return "binaries in " + dir, nil
}

// torch finds a Python that imports torch as the PyTorch tests do.
func torch() (string, error) {
	p, err := torchtest.Find()
	if err != nil {
		return "", err
	}
	return p + " imports torch", nil
}

// python3 finds python3 on PATH, as the Python client's tests do.
func python3() (string, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("no python3 on PATH")
	}
	return p, nil
}

// root: the tests that run jobs as other accounts need root.
func root() (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("not root (uid %d): cannot switch to other accounts", os.Geteuid())
	}
	return "root", nil
}

// TestPrerequisites lists the groups of tests that skip on this machine,
// and why, and how to run them; under CI=true it fails if any would skip.
// Run it with -v to see the groups that run too.
func TestPrerequisites(t *testing.T) {
	var skipped []string
	for _, g := range groups {
		found, err := g.ready()
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("  %s (%s): %v\n    to run them: %s", g.name, g.tests, err, g.fix))
			continue
		}
		t.Logf("run: %s (%s): %s", g.name, g.tests, found)
	}
	if len(skipped) == 0 {
		return
	}
	groupsOf := "groups"
	if len(skipped) == 1 {
		groupsOf = "group"
	}
	msg := fmt.Sprintf("go test ./... skips %d %s of tests on this machine:\n%s\n(CI, with CI=true, fails instead of skipping)",
		len(skipped), groupsOf, strings.Join(skipped, "\n"))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Log(msg)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		fmt.Fprintf(tty, "\n%s\n\n", msg)
		tty.Close()
	}
}
