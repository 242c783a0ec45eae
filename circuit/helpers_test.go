package circuit

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a breaker on a manual clock that records its transitions and
// counts the breaker's readings of its clock.
type rig struct {
	t     testing.TB
	b     *Breaker
	clock *metrics.ManualClock
	reads atomic.Int64 // the breaker's readings of clock
	held  []Permit

	mu    sync.Mutex
	trans []Transition
}

// slowLatency is a latency above every SlowCallDuration the tests use.
const slowLatency = time.Hour

func newRig(t testing.TB, cfg Config) *rig {
	t.Helper()
	r := &rig{t: t, clock: new(metrics.ManualClock)}
	cfg.Clock = readCounter{r}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OnTransition = func(tr Transition) {
		r.mu.Lock()
		r.trans = append(r.trans, tr)
		r.mu.Unlock()
	}
	b, err := New(cfg)
	require.NoError(t, err)
	r.b = b
	return r
}

// readCounter is a rig's clock as its breaker reads it: each reading is
// counted in rig.reads.
type readCounter struct{ r *rig }

func (c readCounter) Now() time.Duration {
	c.r.reads.Add(1)
	return c.r.clock.Now()
}

// fastPath reports whether an Allow that admits reads no clock: the
// breaker is closed, in normal mode, not ramping up.
func (r *rig) fastPath() bool {
	n := r.reads.Load()
	_, err := r.b.Allow()
	return err == nil && r.reads.Load() == n
}

func (r *rig) transitions() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Transition(nil), r.trans...)
}

func (r *rig) reasons() []Reason {
	var out []Reason
	for _, t := range r.transitions() {
		out = append(out, t.Reason)
	}
	return out
}

// call makes one call with outcome o (slow: a success taking slowLatency)
// and returns Allow's error.
func (r *rig) call(o metrics.Event, slow bool) error {
	p, err := r.b.Allow()
	if err != nil {
		return err
	}
	lat := time.Millisecond
	if slow {
		lat = slowLatency
	}
	p.Record(o, lat)
	return nil
}

// run executes a script of space-separated steps, failing the test at the
// first step that does not behave as written:
//
//	s f t i   a call admitted and recorded as Success, Failure, Timeout, Ignored
//	w         a call admitted and recorded as a slow Success
//	x         a call refused (errors.Is(err, ErrOpen))
//	h         a call admitted and held (not recorded yet)
//	rs rf ri  record the oldest held permit as Success, Failure, Ignored
//	+500ms    advance the clock
//	=open     State() must be open (closed, half-open)
//	@forced-open  SetMode (normal, forced-open, forced-closed, observe-only)
//	12*f      repeat a step
func (r *rig) run(script string) {
	r.t.Helper()
	for i, step := range strings.Fields(script) {
		n := 1
		if k, rest, ok := strings.Cut(step, "*"); ok {
			var err error
			n, err = strconv.Atoi(k)
			require.NoError(r.t, err, "step %d %q", i, step)
			step = rest
		}
		for range n {
			r.step(i, step)
		}
	}
}

func (r *rig) step(i int, step string) {
	r.t.Helper()
	where := func() string {
		return "step " + strconv.Itoa(i) + " " + strconv.Quote(step) + " at " + r.clock.Now().String()
	}
	switch {
	case step[0] == '+':
		d, err := time.ParseDuration(step[1:])
		require.NoError(r.t, err, where())
		r.clock.Advance(d)
	case step[0] == '=':
		require.Equal(r.t, step[1:], r.b.State().String(), where())
	case step[0] == '@':
		m, ok := modeByName[step[1:]]
		require.True(r.t, ok, where())
		r.b.SetMode(m)
	case step == "x":
		_, err := r.b.Allow()
		require.ErrorIs(r.t, err, ErrOpen, where())
	case step == "h":
		p, err := r.b.Allow()
		require.NoError(r.t, err, where())
		r.held = append(r.held, p)
	case step[0] == 'r' && len(step) == 2:
		require.NotEmpty(r.t, r.held, where())
		p := r.held[0]
		r.held = r.held[1:]
		p.Record(outcomeByName[step[1:]], time.Millisecond)
	default:
		o, ok := outcomeByName[step]
		require.True(r.t, ok, "unknown "+where())
		require.NoError(r.t, r.call(o, step == "w"), where())
	}
}

var (
	modeByName = map[string]Mode{
		"normal": Normal, "forced-open": ForcedOpen, "forced-closed": ForcedClosed, "observe-only": ObserveOnly,
	}
	outcomeByName = map[string]metrics.Event{"s": metrics.Success, "w": metrics.Success, "f": metrics.Failure, "t": metrics.Timeout, "i": metrics.Cancelled}
)
