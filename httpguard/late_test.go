package httpguard

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// pausingClock is a manual clock whose next reading, once armed, first runs
// a hook: armed when a response arrives, it runs between Run's return and
// Execute's check of the deadline, which is the reading Execute takes then.
type pausingClock struct {
	metrics.ManualClock
	hook atomic.Pointer[func()]
}

func (c *pausingClock) Now() time.Duration {
	if h := c.hook.Swap(nil); h != nil {
		(*h)()
	}
	return c.ManualClock.Now()
}

// armingBase arms the clock with hook once a response has arrived.
type armingBase struct {
	base  http.RoundTripper
	clock *pausingClock
	hook  func()
}

func (a *armingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(req)
	if err == nil {
		a.clock.hook.Store(&a.hook)
	}
	return resp, err
}

// TestTransportLateResponsesAreClosed: a response that arrived in time,
// but whose call is then judged TIMEOUT or CANCELLED (the deadline passes,
// or the caller leaves, between Run's return and Execute's check), never
// reaches the caller: its body is closed exactly once, whatever its status,
// and the connection is free for the next request.
func TestTransportLateResponsesAreClosed(t *testing.T) {
	// Long enough that the local round trip ends before it on a loaded
	// machine. The hook then sleeps 3 timeouts: past the deadline with 2 to
	// spare for the goroutine that cancels the context at the deadline
	// (context.WithDeadline's AfterFunc) to run.
	const timeout = 250 * time.Millisecond
	for _, s := range []command.Strategy{command.Thread, command.Semaphore} {
		for _, ending := range []metrics.Event{metrics.Timeout, metrics.Cancelled} {
			for _, status := range []int32{200, 404, 503} {
				name := s.String() + "/" + ending.String() + "/" + http.StatusText(int(status))
				t.Run(name, func(t *testing.T) {
					var code atomic.Int32
					code.Store(status)
					srv := statusServer(t, &code)
					clock := new(pausingClock)
					reg := newTestRegistry(t, clock)
					tracker := newBodyTracker(t) // one connection per host
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					base := &armingBase{base: tracker, clock: clock, hook: cancel}
					if ending == metrics.Timeout {
						base.hook = func() { time.Sleep(3 * timeout) } // past the deadline
					}
					tr, err := NewTransport(reg, Config{Base: base, Group: command.GroupConfig{Strategy: s, Timeout: timeout}})
					require.NoError(t, err)

					req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					require.NoError(t, err)
					resp, err := tr.RoundTrip(req)
					assert.Nil(t, resp)
					require.Error(t, err)
					g := groupOf(t, reg, srv)
					c := counts(t, g, "GET")
					require.Equal(t, int64(1), c[ending], "the call is judged %v after its response came: %v", ending, err)
					require.Len(t, tracker.closes(), 1)
					tracker.requireClosedOnce(t)

					code.Store(200)
					base.hook = func() {}
					resp, err = get(t, tr, srv.URL)
					require.NoError(t, err, "the connection is free")
					assert.Equal(t, "body of OK", readAll(t, resp))
					tracker.requireClosedOnce(t)
				})
			}
		}
	}
}
