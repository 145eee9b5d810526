package fair

import (
	"strings"
	"testing"

	"github.com/gandiva-sched/gandiva/internal/policy"
)

// TestCheckSetting: gandiva-fair reads tickets/USER with a value from 0 to
// 1e6, and says it reads no other key.
func TestCheckSetting(t *testing.T) {
	p, err := New(policy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, value string
		reads      bool
		err        string
	}{
		{"tickets/alice", "4", true, ""},
		{"tickets/alice", "0", true, ""},
		{"tickets/alice", " 2.5 ", true, ""},
		{"tickets/alice", "-5", true, "not negative"},
		{"tickets/alice", "NaN", true, "finite"},
		{"tickets/alice", "1e7", true, "at most"},
		{"tickets/alice", "four", true, "invalid syntax"},
		{"tickets/", "4", true, "not a user name"},
		{"tickets/Bad Name", "4", true, "not a user name"},
		{"quantum", "60", false, ""},
		{"ticket/alice", "4", false, ""},
	} {
		reads, err := p.CheckSetting(c.key, c.value)
		if reads != c.reads || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s=%q: reads %v, err %v; want %v, %q", c.key, c.value, reads, err, c.reads, c.err)
		}
	}
}
