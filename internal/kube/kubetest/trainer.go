package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

var (
	trainerOnce sync.Once
	trainerPath string
	trainerErr  error
)

// Trainer builds the deterministic trainer (examples/trainer) once per test
// binary and returns its path: the program the stand-in Kubelet runs for
// trainer pods.
func Trainer(t testing.TB) string {
	t.Helper()
	trainerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gandiva-kube-trainer-")
		if err != nil {
			trainerErr = err
			return
		}
		trainerPath = filepath.Join(dir, "trainer")
		out, err := exec.Command("go", "build", "-o", trainerPath, "github.com/gandiva-sched/gandiva/examples/trainer").CombinedOutput()
		if err != nil {
			trainerErr = fmt.Errorf("building the trainer: %v\n%s", err, out)
		}
	})
	if trainerErr != nil {
		t.Fatal(trainerErr)
	}
	return trainerPath
}

var checksumRE = regexp.MustCompile(`checksum=([0-9a-f]{16})`)

// Uninterrupted runs the trainer alone with args and returns its checksum:
// what a job that was suspended, moved or restored must end with.
func Uninterrupted(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(Trainer(t), args...).Output()
	if err != nil {
		t.Fatalf("trainer %v: %v", args, err)
	}
	m := checksumRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("trainer %v printed no checksum:\n%s", args, out)
	}
	return string(m[1])
}
