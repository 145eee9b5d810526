package main

import (
	"os"
	"testing"
)

// upTestArgs are the flags an up run in tests needs: as root, its jobs run
// as nobody (an agent never runs a job as root, and the dedicated account
// is not there), from a work directory nobody can reach.
func upTestArgs(t *testing.T) []string {
	if os.Geteuid() != 0 {
		return nil
	}
	d, err := os.MkdirTemp("", "gandiva-up-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return []string{"--run-as", "nobody", "--work-dir", d}
}
