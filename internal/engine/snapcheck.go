package engine

import (
	"errors"
	"fmt"

	"github.com/gandiva-sched/gandiva/internal/cluster"
)

// ErrSnapshotWritten is wrapped by Round, under Options.CheckSnapshot, when
// the policy changed the snapshot it was given (policy.Policy forbids it).
var ErrSnapshotWritten = errors.New("policy wrote to its snapshot")

// checkSnapshot is Round's check around the policy's Schedule: digests of
// the snapshot before and after (cluster.Digest), kept to reuse their memory.
type checkSnapshot struct{ before, after cluster.Digest }

// wrote returns an error wrapping ErrSnapshotWritten, naming policy and the
// first part it changed, if s differs from the digest taken before.
func (c *checkSnapshot) wrote(policy string, now float64, s *cluster.Snapshot) error {
	c.after.Take(s)
	if where := c.before.Diff(&c.after, s); where != "" {
		return fmt.Errorf("%w: policy %s changed %s during Schedule at t=%.3f", ErrSnapshotWritten, policy, where, now)
	}
	return nil
}
