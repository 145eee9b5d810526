package fjf_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/harness"
)

// TestScenarios runs the golden scenario scripts in testdata (rewrite with
// go test ./internal/policy/fjf -rewrite, then read the diff).
func TestScenarios(t *testing.T) { harness.Run(t, "testdata") }
