package torchtest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadResultAndLossLog(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "result.json")
	if err := os.WriteFile(out, []byte(`{"checksum":"ab12","steps":3,"world_size":2,"start":1,"restored":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, want := ReadResult(t, out), (Result{Checksum: "ab12", Steps: 3, WorldSize: 2, Start: 1, Restored: true}); r != want {
		t.Fatalf("ReadResult = %+v, want %+v", r, want)
	}
	loss := filepath.Join(dir, "loss")
	if err := os.WriteFile(loss, []byte("1 2.5 1\n2 0.125 2\n3 1e-05 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := ReadLossLog(t, loss)
	want := []LossLine{{1, "2.5", 1}, {2, "0.125", 2}, {3, "1e-05", 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("ReadLossLog = %v, want %v", got, want)
	}
	CheckContiguous(t, "loss", got, 3)
}
