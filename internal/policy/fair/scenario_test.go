package fair_test

import (
	"testing"

	"github.com/gandiva-sched/gandiva/internal/harness"
)

func TestScenarios(t *testing.T) { harness.Run(t, "testdata") }
