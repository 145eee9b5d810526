package kube

import (
	"fmt"
	"math"
	"time"

	"github.com/gandiva-sched/gandiva/internal/eta"
)

// clock maps the wall clock to the engine's time, in seconds since the
// Unix epoch. At speed 1 (production) engine time is the wall clock. At
// speed S (simulations and arenas only: Options.ClockSpeed) it runs S
// times faster than the wall clock from origin, the moment the scheduler
// was made: a policy's time constants (quanta, thresholds, declared
// seconds per mini-batch) are then in seconds of a trace replayed S times
// faster, and the scheduler waits 1/S of an engine interval in wall time.
type clock struct {
	speed  float64 // > 0; 0 (the zero clock) is 1
	origin float64 // Unix seconds
}

// rate is the clock's speed (1 for the zero clock).
func (c clock) rate() float64 {
	if c.speed == 0 {
		return 1
	}
	return c.speed
}

// newClock is a clock of the given speed (1 if 0) starting at origin; a
// speed that is negative, NaN or infinite is an error.
func newClock(speed float64, origin time.Time) (clock, error) {
	if speed == 0 {
		speed = 1
	}
	if !(speed > 0) || math.IsInf(speed, 0) {
		return clock{}, fmt.Errorf("kube: clock speed must be a finite number > 0, got %v", speed)
	}
	return clock{speed: speed, origin: float64(origin.UnixNano()) / 1e9}, nil
}

// at is the engine time of the wall time unix (Unix seconds).
func (c clock) at(unix float64) float64 {
	if c.rate() == 1 {
		return unix
	}
	return c.origin + (unix-c.origin)*c.speed
}

// of is the engine time of wall time t.
func (c clock) of(t time.Time) float64 { return c.at(float64(t.UnixNano()) / 1e9) }

// unix is the wall time (Unix seconds) of engine time x: what people are
// shown (ETAs).
func (c clock) unix(x float64) float64 {
	if c.rate() == 1 || math.IsInf(x, 0) {
		return x
	}
	return c.origin + (x-c.origin)/c.speed
}

// wall is the wall duration of d engine seconds.
func (c clock) wall(d float64) time.Duration {
	return time.Duration(d / c.rate() * 1e9)
}

// engineSecs is the engine seconds of wall duration d.
func (c clock) engineSecs(d time.Duration) float64 { return d.Seconds() * c.rate() }

// shown is estimate e with its times on the wall clock, for people.
func (c clock) shown(e eta.Estimate) eta.Estimate {
	e.Start, e.StartLow, e.StartHigh = c.unix(e.Start), c.unix(e.StartLow), c.unix(e.StartHigh)
	e.Finish, e.FinishLow, e.FinishHigh = c.unix(e.Finish), c.unix(e.FinishLow), c.unix(e.FinishHigh)
	return e
}
