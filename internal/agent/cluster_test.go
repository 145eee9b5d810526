package agent

import "testing"

// TestValidCluster: the cluster's name a server sends becomes one element
// of the agent's log and checkpoint paths, so only its own shape passes.
func TestValidCluster(t *testing.T) {
	for id, want := range map[string]bool{
		"": true, "c0123456789abcdef": true,
		"c0123456789ABCDEF": false, "d0123456789abcdef": false, "c0123456789abcde": false,
		"../../etc/passwd": false, "c01234567/9abcdef": false, "c0123456789abcdef0": false,
	} {
		if got := validCluster(id); got != want {
			t.Errorf("validCluster(%q) = %v, want %v", id, got, want)
		}
	}
}
