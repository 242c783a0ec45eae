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

// maxEpoch bounds an epoch: the sync script does its arithmetic in Lua's
// doubles, exact far beyond it.
const maxEpoch = 1e14

// window is one instance's published window: its own counts at At (wall
// clock, Unix ms), all counted in epoch Epoch or later (see the package
// doc).
type window struct {
	Epoch                     int64
	At                        int64
	Success, Failure, Timeout int64
	Slow                      int64
}

// String encodes w as stored in the window hash: "v2 epoch at s f t slow".
func (w window) String() string {
	return fmt.Sprintf("v2 %d %d %d %d %d %d", w.Epoch, w.At, w.Success, w.Failure, w.Timeout, w.Slow)
}

// windowOf returns the published form of a breaker's own window counts.
func windowOf(c metrics.Counts, epoch, at int64) window {
	return window{Epoch: epoch, At: at, Success: c[metrics.Success], Failure: c[metrics.Failure],
		Timeout: c[metrics.Timeout], Slow: c[metrics.Slow]}
}

// counts returns w's counts.
func (w window) counts() metrics.Counts {
	var c metrics.Counts
	c[metrics.Success], c[metrics.Failure], c[metrics.Timeout], c[metrics.Slow] = w.Success, w.Failure, w.Timeout, w.Slow
	return c
}

// parseWindow decodes and checks a window record read at now (Unix ms):
// version, field count, integers in range, Slow <= Success, and At neither
// older than maxAge nor more than skew in the future (a writer whose clock
// is that far off is not trusted).
func parseWindow(s string, now int64, maxAge, skew time.Duration) (window, error) {
	f := strings.Fields(s)
	if len(f) != 7 || f[0] != "v2" {
		return window{}, fmt.Errorf("%w: window %.40q is not \"v2 epoch at s f t slow\"", errBadRecord, s)
	}
	var v [6]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || n < 0 || (i == 0 && n > maxEpoch) || (i >= 2 && n > maxCount) {
			return window{}, fmt.Errorf("%w: window field %d %.20q is out of range", errBadRecord, i+1, f[i+1])
		}
		v[i] = n
	}
	w := window{Epoch: v[0], At: v[1], Success: v[2], Failure: v[3], Timeout: v[4], Slow: v[5]}
	if w.Slow > w.Success {
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

// state is a breaker's fleet state, kept in its state key and changed
// only by syncScript.
type state struct {
	Epoch  int64  // the latest epoch: bumped by every close that starts one
	Closed int64  // the epoch the last fleet-wide close started (<= Epoch)
	Open   bool   // the fleet opened since that close
	Who    string // the instance that changed it last
}

// String encodes s as stored: "v2 epoch closed open(0|1) instance".
func (s state) String() string {
	o := "0"
	if s.Open {
		o = "1"
	}
	return "v2 " + strconv.FormatInt(s.Epoch, 10) + " " + strconv.FormatInt(s.Closed, 10) + " " + o + " " + s.Who
}

// parseState decodes a state record as syncScript returns it.
func parseState(s string) (state, error) {
	f := strings.Fields(s)
	if len(f) != 5 || f[0] != "v2" || (f[3] != "0" && f[3] != "1") {
		return state{}, fmt.Errorf("%w: state %.40q is not \"v2 epoch closed open instance\"", errBadRecord, s)
	}
	e, err1 := strconv.ParseInt(f[1], 10, 64)
	c, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || c < 0 || c > e || e > maxEpoch {
		return state{}, fmt.Errorf("%w: state epochs %.20q %.20q", errBadRecord, f[1], f[2])
	}
	return state{Epoch: e, Closed: c, Open: f[3] == "1", Who: f[4]}, nil
}
