// The Python client's unit tests (python/tests), run by go test so that
// `go test ./...` covers them. TestPythonUnitTests needs only python3
// (standard library) and is skipped where python3 is missing.
// TestPythonTorch runs the tests of real torch.distributed gangs
// (test_*torch*.py) with a Python that has torch (torchtest.Python:
// GANDIVA_TORCH_PYTHON, else /usr/bin/python3, Debian's python3-torch);
// without one it is skipped, or fails under CI=true, where .ci/run
// installs python3-torch.
package python_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/torchtest"
)

func runUnittest(t *testing.T, py string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-W", "error::ResourceWarning", "-m", "unittest", "discover", "-s", "tests", "-v"}, args...)...)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m unittest: %v\n%s", py, err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("unexpected unittest output:\n%s", out)
	}
	t.Logf("%s", out)
}

func TestPythonUnitTests(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	// the torch tests are TestPythonTorch's, with a Python that has torch
	runUnittest(t, py, []string{"GANDIVA_TEST_TORCH="})
}

func TestPythonTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch gangs for a minute or two")
	}
	py := torchtest.Python(t)
	// GANDIVA_TEST_TORCH=1: the torch tests run, and fail if torch is missing
	runUnittest(t, py, []string{"GANDIVA_TEST_TORCH=1"}, "-p", "test_*torch*.py")
}
