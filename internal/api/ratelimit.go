package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateLimit bounds what one token may ask of the API: Rate requests per
// second on average with bursts of Burst (a token bucket), and at most
// Concurrent requests in progress at once (long polls and log streams
// included). Beyond either, a request is a 429 with Retry-After. The zero
// value means DefaultRateLimit.
type RateLimit struct {
	Rate       float64
	Burst      int
	Concurrent int
}

// DefaultRateLimit is generous for people, scripts and agents (an agent
// makes a few requests a second), and bounds a token gone wild.
var DefaultRateLimit = RateLimit{Rate: 100, Burst: 500, Concurrent: 64}

// rateLimiter keeps a bucket per token.
type rateLimiter struct {
	lim   RateLimit
	clock func() time.Time
	mu    sync.Mutex
	b     map[string]*bucket
	seen  int // takes since the last sweep of idle buckets
}

type bucket struct {
	tokens   float64
	at       time.Time
	inFlight int
}

func newRateLimiter(lim RateLimit, clock func() time.Time) *rateLimiter {
	if lim.Rate <= 0 {
		lim.Rate = DefaultRateLimit.Rate
	}
	if lim.Burst <= 0 {
		lim.Burst = DefaultRateLimit.Burst
	}
	if lim.Concurrent <= 0 {
		lim.Concurrent = DefaultRateLimit.Concurrent
	}
	if clock == nil {
		clock = time.Now
	}
	return &rateLimiter{lim: lim, clock: clock, b: map[string]*bucket{}}
}

// enter admits a request of key, or returns the 429 to answer; done must
// be called when an admitted request ends.
func (r *rateLimiter) enter(key string) (done func(), err *Error) {
	now := r.clock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweep(now)
	b := r.b[key]
	if b == nil {
		b = &bucket{tokens: float64(r.lim.Burst), at: now}
		r.b[key] = b
	}
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = math.Min(float64(r.lim.Burst), b.tokens+dt*r.lim.Rate)
		b.at = now
	}
	if b.inFlight >= r.lim.Concurrent {
		return nil, tooMany(1, "%d requests of this token are in progress, the most allowed", b.inFlight)
	}
	if b.tokens < 1 {
		wait := (1 - b.tokens) / r.lim.Rate
		return nil, tooMany(int(math.Ceil(wait)), "more than %g requests per second with this token (bursts of %d)", r.lim.Rate, r.lim.Burst)
	}
	b.tokens--
	b.inFlight++
	return func() {
		r.mu.Lock()
		b.inFlight--
		r.mu.Unlock()
	}, nil
}

// sweep forgets, now and then, buckets that are full and idle (r.mu held).
func (r *rateLimiter) sweep(now time.Time) {
	r.seen++
	if r.seen < 10000 {
		return
	}
	r.seen = 0
	for k, b := range r.b {
		if b.inFlight == 0 && now.Sub(b.at).Seconds()*r.lim.Rate+b.tokens >= float64(r.lim.Burst) {
			delete(r.b, k)
		}
	}
}

// tooMany is a 429; RetryAfter is in whole seconds (at least 1).
func tooMany(retry int, format string, args ...any) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: max(1, retry),
		Message: fmt.Sprintf(format, args...)}
}

func retryAfter(e *Error) string { return strconv.Itoa(e.RetryAfter) }
