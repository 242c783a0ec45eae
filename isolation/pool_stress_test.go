package isolation

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolNoLostWakeup races a worker going idle against a caller that finds the slot taken
// and enqueues. In each round a caller goroutine is already spinning on its own P when the
// work starts; the work flags that it is about to return, the caller sees the flag and calls
// Execute. Who spins how long after the flag adapts round by round (the work less when the
// caller found the slot still taken, more when not), so the caller keeps arriving just as the
// worker leaves, with jitter, landing before, during and after each step of the worker's exit
// (pop, release, recheck) whatever the speed of the machine or -race. A lost wake-up leaves
// the queued call waiting with no worker: its 2 s deadline then drops it and the test fails.
//
// The test runs until 10 000 rounds found the slot taken (about 20 000 rounds, 2-3 s on an idle
// 2-core VM), or 15 s on a loaded one, and fails if too few did: then it proved nothing.
func TestPoolNoLostWakeup(t *testing.T) {
	target, budget := 10000, 15*time.Second
	if testing.Short() {
		target, budget = 1000, 3*time.Second
	}
	p := newTestPool(t, PoolConfig{Size: 1, Queue: 4})
	rng := rand.New(rand.NewPCG(1, 2))
	held := 0 // rounds where the slot was still taken just before the racing Execute
	// offset > 0: the work spins that much after flagging; offset < 0: the caller waits that
	// much after seeing the flag. It settles where the caller arrives as the worker leaves.
	offset := 0
	round := 0
	for deadline := time.Now().Add(budget); held < target && time.Now().Before(deadline); round++ {
		var returning atomic.Bool
		ready := make(chan struct{})
		workSpin, callerSpin := 0, 0
		if d := offset + rng.IntN(2000) - 1000; d >= 0 {
			workSpin = d
		} else {
			callerSpin = -d
		}
		type result struct {
			held bool
			err  error
		}
		raced := make(chan result, 1)
		go func() {
			close(ready)
			spinUntil(&returning)
			spin(callerSpin)
			h := p.slots.Load()&slotsCount >= 1
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			raced <- result{h, p.Execute(ctx, func(context.Context) {})}
		}()
		// Block rather than spin or yield: the caller goroutine is running (it closed ready)
		// and keeps its P, so this goroutine, and then the work handed over from it, resume
		// on the other P.
		<-ready
		require.NoError(t, p.Execute(context.Background(), func(context.Context) {
			returning.Store(true)
			spin(workSpin)
		}))
		r := <-raced
		require.NoError(t, r.err, "round %d: the queued call was not picked up", round)
		if r.held {
			held++
			offset = max(-50_000, offset-100)
		} else {
			offset = min(50_000, offset+100)
		}
	}
	t.Logf("%d rounds, slot still taken just before the racing Execute in %d (offset settled at %d)",
		round, held, offset)
	if held < target/10 {
		// Other processes kept this one from running two threads at once: no race happened,
		// so nothing was proved either way. TestPoolNoLostWakeupAtEachStep does not depend on it.
		t.Skipf("machine too busy to race the worker: only %d of %d rounds found the slot taken", held, round)
	}
}

// TestPoolNoLostWakeupAtEachStep forces, through the pool's race hook, each interleaving of a
// worker going idle and a caller queueing, round after round. Either side's recheck alone
// saves the call; removing either one makes the matching case hang until its 2 s deadline.
func TestPoolNoLostWakeupAtEachStep(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	waitFor := func(cond func() bool) {
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Error("condition not reached")
				return
			}
			runtime.Gosched()
		}
	}

	t.Run("caller queues after the worker found the queue empty", func(t *testing.T) {
		p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
		var armed atomic.Bool
		raced := make(chan (<-chan error), 1)
		p.raceHook = func(at racePoint) {
			if at != workerIdle || !armed.CompareAndSwap(true, false) {
				return
			}
			// The worker still holds its slot: the caller finds none, queues, and its own
			// recheck fails too. Only the worker's recheck, after its release, can see it.
			res := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				res <- p.Execute(ctx, func(context.Context) {})
			}()
			raced <- res
			waitFor(func() bool { return p.queue.n.Load() == 1 })
			time.Sleep(100 * time.Microsecond) // the caller's recheck comes right after its push
		}
		for round := range rounds {
			// The worker that ran the last round's queued call may not have
			// passed its idle check yet: arming before it lets go of its slot
			// would race a second caller against this round's own call.
			waitFor(func() bool { return p.slots.Load()&slotsCount == 0 })
			armed.Store(true)
			require.NoError(t, p.Execute(context.Background(), func(context.Context) {}))
			require.NoError(t, receive(t, <-raced), "round %d: the queued call was not picked up", round)
		}
	})

	t.Run("worker leaves after the caller found no slot", func(t *testing.T) {
		p := newTestPool(t, PoolConfig{Size: 1, Queue: 1})
		var armed atomic.Bool
		var release chan struct{}
		var busy <-chan error
		p.raceHook = func(at racePoint) {
			if at != callerFull || !armed.CompareAndSwap(true, false) {
				return
			}
			// The caller found no slot and has not queued yet: the worker now finishes, finds
			// the queue empty, releases its slot and publishes the result. Only the caller's
			// recheck, after its push, can see the slot free.
			close(release)
			require.NoError(t, receive(t, busy))
			assert.Zero(t, p.slots.Load()&slotsCount, "slot released before the result")
			time.Sleep(100 * time.Microsecond) // the worker's recheck comes right after it published
		}
		for round := range rounds {
			release = make(chan struct{})
			started := make(chan struct{})
			busy = async(p, context.Background(), func(context.Context) {
				close(started)
				<-release
			})
			<-started
			armed.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := p.Execute(ctx, func(context.Context) {})
			cancel()
			require.NoError(t, err, "round %d: the queued call was not picked up", round)
		}
	})
}

// countingHandler is a slog.Handler that counts records.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countingHandler) WithGroup(string) slog.Handler             { return h }

// spinUntil spins until flag is set. It yields only after a millisecond, in case the
// goroutine that sets the flag is queued behind this one on its P: yielding at once would let
// that goroutine run here, sequentially, and there would be no race to test.
func spinUntil(flag *atomic.Bool) {
	start := time.Now()
	for i := 1; !flag.Load(); i++ {
		if i%1024 == 0 && time.Since(start) > time.Millisecond {
			runtime.Gosched()
		}
	}
}

var spinSink atomic.Int64

// spin burns about n×2 ns without yielding.
func spin(n int) {
	x := int64(0)
	for i := range n {
		x += int64(i)
	}
	spinSink.Add(x)
}

// outcome is how a stress call ended, from the caller's point of view.
type outcome int

const (
	outSuccess outcome = iota
	outPanicked
	outDetached
	outRejected
	outDropped
	numOutcomes
)

// classify maps Execute's error to exactly one outcome and fails on anything else.
func classify(t *testing.T, err error) outcome {
	var pe *PanicError
	matches := 0
	out := outcome(-1)
	for o, ok := range map[outcome]bool{
		outSuccess:  err == nil,
		outPanicked: errors.As(err, &pe),
		outDetached: errors.Is(err, ErrDetached),
		outRejected: errors.Is(err, ErrRejected),
		outDropped:  errors.Is(err, ErrDropped),
	} {
		if ok {
			matches++
			out = o
		}
	}
	if matches != 1 {
		t.Errorf("error %v matches %d outcomes", err, matches)
	}
	return out
}

// TestPoolStress: 64 submitters, random run times, timeouts and panics against a pool of 4
// with a queue of 8. Every call must end in exactly one outcome, the outcomes must balance with
// the work that actually ran, the bounds must hold at every sample, and the pool must end idle.
func TestPoolStress(t *testing.T) {
	const size, queueLen, submitters = 4, 8, 64
	total := 100_000
	if testing.Short() {
		total = 10_000
	}
	logged := &countingHandler{}
	p := newTestPool(t, PoolConfig{Size: size, Queue: queueLen, Logger: slog.New(logged)})

	ran := make([]atomic.Int32, total)
	panics := make([]bool, total)
	var running, maxRunning, executed atomic.Int64
	var next atomic.Int64
	var outcomes [numOutcomes]atomic.Int64
	perCall := make([]outcome, total)

	stop := make(chan struct{})
	sampled := make(chan int)
	go func() { // checks the gauges while the load runs
		n := 0
		for {
			select {
			case <-stop:
				sampled <- n
				return
			default:
			}
			s := p.Stats()
			if s.Active > size || s.Queued > queueLen || s.Detached > size {
				t.Errorf("bounds broken: %+v", s)
			}
			n++
			time.Sleep(50 * time.Microsecond)
		}
	}()

	start := time.Now()
	var wg sync.WaitGroup
	for g := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(42, uint64(g)))
			for {
				id := int(next.Add(1) - 1)
				if id >= total {
					return
				}
				kind := rng.IntN(100)
				panics[id] = kind >= 98
				sleep := time.Duration(rng.IntN(100)) * time.Microsecond
				work := func(context.Context) {
					if ran[id].Add(1) != 1 {
						t.Errorf("call %d ran twice", id)
					}
					n := running.Add(1)
					for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
					}
					defer func() {
						running.Add(-1)
						executed.Add(1)
					}()
					switch {
					case kind < 70: // returns at once
					case kind < 88:
						runtime.Gosched()
					case kind < 98:
						time.Sleep(sleep)
					default:
						panic("stress")
					}
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if rng.IntN(2) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
				}
				err := p.Execute(ctx, work)
				cancel()
				o := classify(t, err)
				if o == outRejected { // back off, or rejections crowd out every other outcome
					time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
				}
				perCall[id] = o
				outcomes[o].Add(1)
				if (o == outSuccess || o == outPanicked) && ran[id].Load() != 1 {
					t.Errorf("call %d returned %v but its work did not run", id, err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	samples := <-sampled

	eventually(t, func() bool {
		s := p.Stats()
		return s.Active == 0 && s.Detached == 0 && s.Queued == 0
	}, "pool idle after the load")

	var o [numOutcomes]int64
	for i := range o {
		o[i] = outcomes[i].Load()
	}
	t.Logf("%d calls in %v: success %d, panicked %d, detached %d, rejected %d, dropped %d; "+
		"max running %d; %d samples", total, elapsed, o[outSuccess], o[outPanicked], o[outDetached],
		o[outRejected], o[outDropped], maxRunning.Load(), samples)

	assert.Equal(t, int64(total), o[outSuccess]+o[outPanicked]+o[outDetached]+o[outRejected]+o[outDropped])
	assert.Equal(t, executed.Load(), o[outSuccess]+o[outPanicked]+o[outDetached], "work run = calls that reached it")
	wantLogged := int64(0)
	for id := range total {
		if panics[id] && perCall[id] == outDetached {
			wantLogged++
		}
		want := int32(0)
		if c := perCall[id]; c == outSuccess || c == outPanicked || c == outDetached {
			want = 1
		}
		if ran[id].Load() != want {
			t.Fatalf("call %d ended %d but its work ran %d times", id, perCall[id], ran[id].Load())
		}
	}
	assert.Equal(t, wantLogged, logged.n.Load(), "one log record per panic of detached work")
	assert.LessOrEqual(t, maxRunning.Load(), int64(size))
	for _, out := range []outcome{outSuccess, outPanicked, outDetached, outRejected, outDropped} {
		assert.Positive(t, o[out], "outcome %d never happened: the stress does not cover it", out)
	}

	s := p.Stats()
	assert.Equal(t, executed.Load(), s.Completed)
	assert.Equal(t, o[outRejected], s.Rejected)
	assert.LessOrEqual(t, s.LargestActive, size)
	assert.Equal(t, size, s.LargestActive)
	require.NoError(t, p.Close(context.Background()))
}

// TestPoolExecuteOwnedGivesEachResultOneOwner races callers' deadlines against their work's
// return, around the moment the work ends: every work that ran has exactly one owner of its
// result, its caller (nil or *PanicError) or orphaned (ErrDetached), and a work that did not
// run has none.
func TestPoolExecuteOwnedGivesEachResultOneOwner(t *testing.T) {
	const size, queueLen, submitters = 4, 4, 16
	total := 10_000
	if testing.Short() {
		total = 2_000
	}
	p := newTestPool(t, PoolConfig{Size: size, Queue: queueLen, Logger: slog.New(&countingHandler{})})
	ran := make([]atomic.Bool, total)
	owners := make([]atomic.Int32, total)
	var next, detached, orphans, answered atomic.Int64
	var wg sync.WaitGroup
	for g := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(7, uint64(g)))
			for {
				id := int(next.Add(1) - 1)
				if id >= total {
					return
				}
				d := time.Duration(50+rng.IntN(100)) * time.Microsecond
				// Spinning keeps the work's end close to the deadline without yielding;
				// sleeping lets the callers run on a machine with fewer cores than workers.
				panics, work, sleep := rng.IntN(20) == 0, rng.IntN(50_000), time.Duration(0)
				if rng.IntN(2) == 0 {
					work, sleep = 0, time.Duration(rng.IntN(200))*time.Microsecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				err := p.ExecuteOwned(ctx, func(context.Context) {
					ran[id].Store(true)
					spin(work)
					time.Sleep(sleep)
					if panics {
						panic("owned")
					}
				}, func() {
					orphans.Add(1)
					owners[id].Add(1)
				})
				cancel()
				switch o := classify(t, err); o {
				case outSuccess, outPanicked:
					owners[id].Add(1)
					answered.Add(1)
				case outDetached:
					detached.Add(1)
				case outRejected:
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	eventually(t, func() bool { s := p.Stats(); return s.Active == 0 && s.Detached == 0 }, "pool idle")
	for id := range total {
		want := int32(0)
		if ran[id].Load() {
			want = 1
		}
		if got := owners[id].Load(); got != want {
			t.Fatalf("call %d: work ran %v, its result had %d owners", id, ran[id].Load(), got)
		}
	}
	assert.Equal(t, detached.Load(), orphans.Load(), "orphaned is called once per detached call")
	assert.Positive(t, detached.Load(), "no call was detached: the test proves nothing")
	assert.Positive(t, answered.Load(), "no call was answered: the test proves nothing")
	t.Logf("%d calls: %d answered, %d detached", total, answered.Load(), detached.Load())
}
