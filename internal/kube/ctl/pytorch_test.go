package ctl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gandiva-sched/gandiva/internal/kube/cplane"
)

// certPair is a valid tls.crt, tls.key and ca.crt, as the operator's
// rotator writes them to its Secret.
func certPair(t *testing.T) map[string][]byte {
	t.Helper()
	c, err := cplane.MakeCerts(cplane.CertSpec{CAName: "test-ca", CAFor: time.Hour, Name: "127.0.0.1", For: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"tls.crt": c.Cert, "tls.key": c.Key, "ca.crt": c.CA}
}

// mountCerts writes a pair into a new directory (and its parent), each
// file this user's alone; a valid pair already there is kept (another
// operator may read it); a broken one is replaced; a broken pair to write
// is an error, not a file.
func TestCertDirWritesAndKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k8s-webhook-server", "serving-certs")
	first := certPair(t)
	if err := mountCerts(dir, first); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.Equal(b, first[f]) {
			t.Fatalf("%s: %v, or not the pair's", f, err)
		}
		if st, _ := os.Stat(filepath.Join(dir, f)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if st, _ := os.Stat(d); st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, st.Mode().Perm())
		}
	}
	if err := mountCerts(dir, certPair(t)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); !bytes.Equal(b, first["tls.crt"]) {
		t.Error("a valid pair in place was replaced")
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := certPair(t)
	if err := mountCerts(dir, second); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tls.key")); !bytes.Equal(b, second["tls.key"]) {
		t.Error("a broken pair in place was kept")
	}
	fresh := filepath.Join(t.TempDir(), "d", "serving-certs")
	if err := mountCerts(fresh, map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("y"), "ca.crt": []byte("z")}); err == nil {
		t.Error("a broken pair was written")
	}
	if _, err := os.Stat(filepath.Join(fresh, "tls.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a broken pair left tls.crt (%v)", err)
	}
}

// The directory and its parent are under /tmp, everyone's: a link there,
// or a directory others may write, is refused, and nothing is written
// through it.
func TestCertDirRefusesLinksAndOthersDirs(t *testing.T) {
	pair := certPair(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, parent, target string) string // returns the cert dir
	}{
		{"the directory a link", func(t *testing.T, parent, target string) string {
			if err := os.Mkdir(parent, 0o700); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(parent, "serving-certs")
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{"its parent a link", func(t *testing.T, parent, target string) string {
			if err := os.Symlink(target, parent); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(parent, "serving-certs")
		}},
		{"its parent writable by others", func(t *testing.T, parent, _ string) string {
			if err := os.Mkdir(parent, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, 0o777); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(parent, "serving-certs")
		}},
		{"the directory writable by its group", func(t *testing.T, parent, _ string) string {
			dir := filepath.Join(parent, "serving-certs")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			target := filepath.Join(base, "elsewhere")
			if err := os.Mkdir(target, 0o700); err != nil {
				t.Fatal(err)
			}
			dir := tc.setup(t, filepath.Join(base, "k8s-webhook-server"), target)
			err := mountCerts(dir, pair)
			if err == nil || !strings.Contains(err.Error(), "remove it") {
				t.Fatalf("mountCerts: %v, want a refusal saying to remove it", err)
			}
			if ents, _ := os.ReadDir(target); len(ents) > 0 {
				t.Errorf("written through the link: %v", ents)
			}
			if _, err := os.Stat(filepath.Join(dir, "tls.crt")); err == nil {
				t.Error("tls.crt written")
			}
		})
	}
}

// Two planes' operators mount at once: each call leaves one valid pair,
// every file of the same pair.
func TestCertDirConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k8s-webhook-server", "serving-certs")
	pairs := []map[string][]byte{certPair(t), certPair(t), certPair(t), certPair(t)}
	errs := make(chan error, len(pairs))
	for _, p := range pairs {
		go func() { errs <- mountCerts(dir, p) }()
	}
	for range pairs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	crt, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	key, _ := os.ReadFile(filepath.Join(dir, "tls.key"))
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	n := 0
	for _, p := range pairs {
		if bytes.Equal(crt, p["tls.crt"]) && bytes.Equal(key, p["tls.key"]) && bytes.Equal(ca, p["ca.crt"]) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the directory holds no one pair whole (%d matches)", n)
	}
}

// The Training Operator is one of --workloads' kinds; without its binary
// Check says which script builds it.
func TestCheckPyTorchNotBuilt(t *testing.T) {
	t.Setenv("GANDIVA_KUBE_BIN", t.TempDir())
	_, err := Check(PyTorch)
	var nb *NotBuiltError
	if !errors.As(err, &nb) || nb.Name != PyTorch || !strings.Contains(err.Error(), "scripts/kube-workloads") ||
		!strings.HasSuffix(nb.Path, "/training-operator.v1") {
		t.Errorf("Check(pytorch) with no binaries: %v, want the pytorch controller (training-operator.v1) not built, naming scripts/kube-workloads", err)
	}
}
