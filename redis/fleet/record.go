package fleet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// errBadRecord is wrapped by every reason a value read from Redis is
// rejected.
var errBadRecord = errors.New("fleet: bad record")

// errTooOld is wrapped by the rejection of a record that aged out (it
// wraps errBadRecord too).
var errTooOld = fmt.Errorf("%w: too old", errBadRecord)

// maxCount bounds a count read from Redis: more calls than this in one
// window is garbage, not traffic.
const maxCount = 1 << 40

// window is one instance's published window: its own counts at At (wall
// clock, ms), its window last cleared at Reset.
type window struct {
	At, Reset                 int64 // Unix ms
	Success, Failure, Timeout int64
	Slow                      int64
}

// String encodes w as stored in the window hash: "v1 at reset s f t slow".
func (w window) String() string {
	return fmt.Sprintf("v1 %d %d %d %d %d %d", w.At, w.Reset, w.Success, w.Failure, w.Timeout, w.Slow)
}

// windowOf returns the published form of a breaker's own window counts.
func windowOf(c metrics.Counts, at, reset int64) window {
	return window{At: at, Reset: reset, Success: c[metrics.Success], Failure: c[metrics.Failure],
		Timeout: c[metrics.Timeout], Slow: c[metrics.Slow]}
}

// addTo adds w's counts to c.
func (w window) addTo(c *metrics.Counts) {
	c[metrics.Success] += w.Success
	c[metrics.Failure] += w.Failure
	c[metrics.Timeout] += w.Timeout
	c[metrics.Slow] += w.Slow
}

// parseWindow decodes and checks a window record read at now (Unix ms):
// version, field count, integers in range, Reset <= At, Slow <= Success, and
// At neither older than maxAge nor more than skew in the future (a writer
// whose clock is that far off is not trusted).
func parseWindow(s string, now int64, maxAge, skew time.Duration) (window, error) {
	f := strings.Fields(s)
	if len(f) != 7 || f[0] != "v1" {
		return window{}, fmt.Errorf("%w: window %.40q is not \"v1 at reset s f t slow\"", errBadRecord, s)
	}
	var v [6]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || n < 0 || (i >= 2 && n > maxCount) {
			return window{}, fmt.Errorf("%w: window field %d %.20q is not a count", errBadRecord, i+1, f[i+1])
		}
		v[i] = n
	}
	w := window{At: v[0], Reset: v[1], Success: v[2], Failure: v[3], Timeout: v[4], Slow: v[5]}
	switch {
	case w.Reset > w.At:
		return window{}, fmt.Errorf("%w: window reset %d after its time %d", errBadRecord, w.Reset, w.At)
	case w.Slow > w.Success:
		return window{}, fmt.Errorf("%w: window slow %d above successes %d", errBadRecord, w.Slow, w.Success)
	}
	return w, checkAge(w.At, now, maxAge, skew)
}

// checkAge rejects a time stamp at older than maxAge, or more than skew
// ahead of now (all Unix ms but the durations).
func checkAge(at, now int64, maxAge, skew time.Duration) error {
	switch {
	case at > now+skew.Milliseconds():
		return fmt.Errorf("%w: time %d is %v in the future (clock skew)", errBadRecord, at,
			time.Duration(at-now)*time.Millisecond)
	case at < now-maxAge.Milliseconds():
		return fmt.Errorf("%w: time %d is %v old", errTooOld, at, time.Duration(now-at)*time.Millisecond)
	}
	return nil
}

// verdict is a fleet-wide state change published in the state key.
type verdict struct {
	Open     bool   // open, else closed
	At       int64  // Unix ms
	Instance string // who published it
}

// String encodes v as stored: "v1 open|closed at instance".
func (v verdict) String() string {
	st := "closed"
	if v.Open {
		st = "open"
	}
	return "v1 " + st + " " + strconv.FormatInt(v.At, 10) + " " + v.Instance
}

// parseVerdict decodes and checks a state record read at now (Unix ms).
func parseVerdict(s string, now int64, maxAge, skew time.Duration) (verdict, error) {
	f := strings.Fields(s)
	if len(f) != 4 || f[0] != "v1" || (f[1] != "open" && f[1] != "closed") {
		return verdict{}, fmt.Errorf("%w: state %.40q is not \"v1 open|closed at instance\"", errBadRecord, s)
	}
	at, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || at < 0 {
		return verdict{}, fmt.Errorf("%w: state time %.20q", errBadRecord, f[2])
	}
	return verdict{Open: f[1] == "open", At: at, Instance: f[3]}, checkAge(at, now, maxAge, skew)
}
