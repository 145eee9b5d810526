package main

import (
	"fmt"
	"math"
	"time"
)

// Checks of numeric flags, shared by the commands: each error names the
// flag and says what is accepted.

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// nonNegative: a finite number ≥ 0.
func nonNegative(flag string, v float64) error {
	if !finite(v) || v < 0 {
		return fmt.Errorf("%s: must be a number ≥ 0, got %v", flag, v)
	}
	return nil
}

// positive: a finite number > 0.
func positive(flag string, v float64) error {
	if !finite(v) || v <= 0 {
		return fmt.Errorf("%s: must be a number > 0, got %v", flag, v)
	}
	return nil
}

// between: a finite number in [lo, hi].
func between(flag string, v, lo, hi float64) error {
	if !finite(v) || v < lo || v > hi {
		return fmt.Errorf("%s: must be a number from %v to %v, got %v", flag, lo, hi, v)
	}
	return nil
}

// intAtLeast: an integer ≥ lo.
func intAtLeast[T int | int64](flag string, v, lo T) error {
	if v < lo {
		return fmt.Errorf("%s: must be at least %d, got %d", flag, lo, v)
	}
	return nil
}

// intBetween: an integer in [lo, hi].
func intBetween[T int | int64](flag string, v, lo, hi T) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: must be from %d to %d, got %d", flag, lo, hi, v)
	}
	return nil
}

// positiveDuration: a duration > 0.
func positiveDuration(flag string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s: must be a positive duration (such as 30s), got %s", flag, d)
	}
	return nil
}

// nonNegativeDuration: a duration ≥ 0.
func nonNegativeDuration(flag string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s: must not be negative, got %s", flag, d)
	}
	return nil
}
