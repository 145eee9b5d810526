package plural

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "node", "0 nodes"}, {1, "node", "1 node"}, {2, "node", "2 nodes"},
		{1, "GPU", "1 GPU"}, {4, "GPU", "4 GPUs"}, {-1, "attempt", "-1 attempts"},
		{1, "entry|entries", "1 entry"}, {3, "entry|entries", "3 entries"},
		{1, "waiting job", "1 waiting job"}, {2, "waiting job", "2 waiting jobs"},
	} {
		if got := Of(c.n, c.noun); got != c.want {
			t.Errorf("Of(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
	if Noun(1, "asks|ask") != "asks" || Noun(2, "asks|ask") != "ask" {
		t.Error("Noun: a verb agreeing with its count")
	}
}
