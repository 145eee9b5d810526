// The Python client's unit tests (python/tests), run by go test so that
// `go test ./...` covers them. They need only python3 (standard library);
// the test is skipped where python3 is missing.
package python_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestPythonUnitTests(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	cmd := exec.Command(py, "-W", "error::ResourceWarning", "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("unexpected unittest output:\n%s", out)
	}
	t.Logf("%s", out)
}
