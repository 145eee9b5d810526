package main

import (
	"strings"
	"testing"
)

// TestKubeLeaseFlags checks that gandiva kube refuses leader-election
// durations client-go's elector cannot take, naming the flag, before it
// reads a kubeconfig.
func TestKubeLeaseFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--lease-duration", "10s", "--lease-renew-deadline", "20s"}, "--lease-renew-deadline"},
		{[]string{"--lease-renew-deadline", "2s"}, "--lease-retry-period"},
		{[]string{"--lease-duration", "0s"}, "--lease-duration"},
	} {
		_, _, err := run(t, append([]string{"kube", "--kubeconfig", "/no/such/kubeconfig"}, c.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag) {
			t.Errorf("gandiva kube %s: error %v, want one starting with %s", strings.Join(c.args, " "), err, c.flag)
		}
	}
	if err := leaseTimes(10*60e9, 9*60e9, 10e9); err != nil {
		t.Errorf("10m, 9m, 10s: %v", err)
	}
}
