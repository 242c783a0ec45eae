package limiter

import (
	"math"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// WarmUpSettings are what a WarmUp runs on: a ratelimit.WarmUpConfig,
// validated, defaults applied.
type WarmUpSettings struct {
	Rate       float64
	Burst      int
	ColdFactor float64
	Period     time.Duration
	IdleAfter  time.Duration
	Clock      metrics.Clock
}

// WarmUp is the engine of ratelimit.WarmUp: a token bucket whose rate rises
// linearly from ColdFactor×Rate to Rate over Period after its first call
// and after IdleAfter without an admitted call.
type WarmUp struct {
	mu        sync.Mutex
	cfg       WarmUpSettings
	refuse    Refuse
	tokens    float64
	last      time.Duration // tokens are as of last (the last admission)
	warmFrom  time.Duration // start of the current warm-up
	lastAdmit time.Duration
	started   bool
}

// NewWarmUp returns a cold WarmUp on s.
func NewWarmUp(s WarmUpSettings, refuse Refuse) *WarmUp { return &WarmUp{cfg: s, refuse: refuse} }

// Clock returns the limiter's clock.
func (w *WarmUp) Clock() metrics.Clock { return w.cfg.Clock }

// Admit is AdmitAt at the clock's reading now.
func (w *WarmUp) Admit() error { return w.AdmitAt(w.cfg.Clock.Now()) }

// AdmitAt takes a token at instant now, or refuses with the time until the
// next token at the current rate.
func (w *WarmUp) AdmitAt(now time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || now-w.lastAdmit >= w.cfg.IdleAfter {
		w.cool(now)
	}
	// The tokens gained since the last admission, in one step (summing the
	// gains of every refused call would add up rounding errors).
	tokens := w.tokens
	if now > w.last {
		tokens = min(tokens+w.gained(w.last, now), float64(w.cfg.Burst))
	}
	if tokens >= 1-epsilon {
		w.tokens, w.last, w.lastAdmit = tokens-1, max(now, w.last), now
		return nil
	}
	return w.refuse(time.Duration(math.Ceil((1 - tokens) / w.rateAt(now) * float64(time.Second))))
}

// cool restarts the warm-up at now, with at most a cold bucket's tokens.
func (w *WarmUp) cool(now time.Duration) {
	cold := max(1, math.Floor(w.cfg.ColdFactor*float64(w.cfg.Burst)))
	if !w.started || w.tokens > cold {
		w.tokens = cold
	}
	w.started, w.warmFrom, w.last, w.lastAdmit = true, now, now, now
}

// rateAt returns the rate, in calls a second, at instant now.
func (w *WarmUp) rateAt(now time.Duration) float64 {
	f := min(1, max(0, float64(now-w.warmFrom)/float64(w.cfg.Period)))
	return w.cfg.Rate * (w.cfg.ColdFactor + (1-w.cfg.ColdFactor)*f)
}

// epsilon absorbs the rounding of gained: a token due at an instant must
// not be missed by 1e-15 and arrive a call later.
const epsilon = 1e-9

// gained returns the tokens the rate adds from a to b: its integral.
func (w *WarmUp) gained(a, b time.Duration) float64 {
	c := w.cfg.ColdFactor
	secs := (b - a).Seconds()
	return w.cfg.Rate * (c*secs + (1-c)*(w.ramp(b)-w.ramp(a)))
}

// ramp is an antiderivative, in seconds, of the warm-up's progress (0 to 1,
// linear over Period from warmFrom).
func (w *WarmUp) ramp(t time.Duration) float64 {
	u, p := (t - w.warmFrom).Seconds(), w.cfg.Period.Seconds()
	switch {
	case u <= 0:
		return 0
	case u < p:
		return u * u / (2 * p)
	}
	return p/2 + (u - p)
}
