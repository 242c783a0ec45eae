package isolation

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/ants/v2"

	"github.com/bulwark-go/bulwark/internal/deadline"
)

// DefaultPoolSize is the Pool size used when PoolConfig.Size is 0 (Hystrix's coreSize).
const DefaultPoolSize = 10

// maxCapacity bounds sizes and queue lengths, far above anything useful.
const maxCapacity = math.MaxInt32

// PoolConfig configures a Pool. The zero value is a pool of DefaultPoolSize workers and no
// queue.
type PoolConfig struct {
	// Size is the number of calls that may run at once. 0 means DefaultPoolSize.
	Size int
	// Queue is the number of calls that may wait for a free worker. 0 means no queue: a call
	// that finds every worker busy is rejected at once.
	Queue int
	// Logger receives the panics of detached work. nil means slog.Default().
	Logger *slog.Logger
	// Workers, if set, are the goroutines the Pool runs its calls on, shared with other Pools:
	// the Pool then has no goroutine of its own while idle, and its Close leaves the goroutines
	// to Workers.Close. nil means workers of its own (two goroutines while the Pool is open,
	// plus its idle workers for about a second).
	Workers *Workers
}

// WithDefaults returns the effective configuration: the documented default for every zero field.
func (c PoolConfig) WithDefaults() PoolConfig {
	if c.Size == 0 {
		c.Size = DefaultPoolSize
	}
	return c
}

// Validate reports a negative or out-of-range field; the error wraps ErrInvalidConfig.
func (c PoolConfig) Validate() error {
	if err := checkRange("Size", c.Size, 0); err != nil {
		return err
	}
	return checkRange("Queue", c.Queue, 0)
}

func checkRange(field string, v, lowest int) error {
	if v < lowest || v > maxCapacity {
		return fmt.Errorf("%w: %s = %d, want %d..%d", ErrInvalidConfig, field, v, lowest, maxCapacity)
	}
	return nil
}

// The slots word: how many workers hold a slot, plus two flags set by Close.
const (
	slotsClosing = 1 << 62 // Execute admits no new call; queued calls still get workers
	slotsSealed  = 1 << 61 // nobody takes a slot any more
	slotsCount   = slotsSealed - 1
)

// Pool is a bulkhead of worker goroutines (from an ants pool) with a bounded FIFO queue of
// waiting calls. A Pool is safe for concurrent use. Create it with NewPool and Close it when
// done: until then it keeps a few goroutines of its own.
//
// Execute hands work to a worker and waits for it, its context, or both:
//   - a free worker: the work runs at once;
//   - every worker busy and room in the queue: the call waits in the queue; a worker that
//     finishes its work takes the oldest queued call before it goes idle;
//   - every worker busy and the queue full: ErrRejected at once, without blocking;
//   - the context ends while the call is queued: the call leaves the queue and its work never
//     runs (ErrDropped);
//   - the context ends while the work runs: the caller returns at once (ErrDetached); the work
//     goes on with the ended context and keeps its worker until it returns, so a hung
//     dependency fills its own bulkhead, not its callers' goroutines.
//
// A deadline in the context therefore covers queue time plus run time.
type Pool struct {
	slots      atomic.Int64 // workers holding a slot | slotsClosing | slotsSealed
	size       atomic.Int64
	queue      queue
	watch      watch // wakes callers at their deadline.Context's deadline
	workers    *ants.Pool
	shared     *Workers  // PoolConfig.Workers: workers is theirs; nil when it is the Pool's own
	startQueue func()    // serve(nil): a worker that starts with the queue
	jobs       sync.Pool // *job
	detached   atomic.Int64
	largest    atomic.Int64
	completed  atomic.Int64
	rejected   atomic.Int64
	logger     *slog.Logger
	resizeMu   sync.Mutex
	closeOnce  atomic.Bool

	// raceHook, nil except in tests, is called at the two points where a worker going idle
	// races with a caller that is about to queue, so that tests can force each interleaving.
	raceHook func(racePoint)
}

// racePoint names a point of a race the tests force: the worker-idle/caller-queues race (see
// serve), and a shrink between acquire's read of the size and its swap.
type racePoint int

const (
	workerIdle racePoint = iota // serve: the queue looked empty, the slot is not yet released
	callerFull                  // Execute: no slot was free, the call is not yet queued
	sizeRead                    // acquire: a slot looked free under the size read, not yet taken
)

// NewPool returns a Pool configured by cfg, or an error wrapping ErrInvalidConfig (or
// ErrClosed for closed cfg.Workers). At most Size works run at once; a worker left idle exits
// after about a second.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	p := &Pool{logger: cfg.Logger, shared: cfg.Workers}
	p.size.Store(int64(cfg.Size))
	p.queue.capacity = cfg.Queue
	p.jobs.New = func() any {
		j := &job{done: make(chan struct{}, 2)}
		j.task = func() { p.serve(j) }
		return j
	}
	p.startQueue = func() { p.serve(nil) }
	if p.shared != nil {
		if err := p.shared.attach(); err != nil {
			return nil, fmt.Errorf("isolation: shared workers: %w", err)
		}
		p.workers = p.shared.ants
		return p, nil
	}
	// Admission is the Pool's own (the slots word), not ants' capacity: a worker frees its
	// slot before ants puts it back on its idle list, so ants' count lags behind and would
	// refuse calls that have a free slot. The ants pool is therefore unbounded and
	// nonblocking: at most Size of its goroutines run work at once, a few more may be on
	// their way back to its idle list, and ants retires idle ones after about a second.
	workers, err := ants.NewPool(-1, ants.WithNonblocking(true), ants.WithLogger(antsLogger{p.log}))
	if err != nil {
		return nil, fmt.Errorf("isolation: starting worker pool: %w", err)
	}
	p.workers = workers
	return p, nil
}

// Execute runs work(ctx) on a worker and waits until it returns or ctx ends. It returns:
//   - nil when work returned, or a *PanicError when it panicked (the Pool keeps working);
//   - an error matching ErrRejected, at once, when every worker is busy and the queue full;
//   - an error matching ErrDropped and ctx.Err() when ctx ended before the work started;
//     the work never runs;
//   - an error matching ErrDetached and ctx.Err() when ctx ended while the work ran; the
//     work goes on with ctx (ended) and keeps its worker until it returns; its result is
//     dropped and a panic is logged;
//   - ErrClosed after Close.
//
// ctx is the context work receives. Read what work produced only after a nil return: after
// ErrDetached it is still running (see ExecuteOwned for work whose results need an owner once
// its caller has gone). ctx must not be nil.
func (p *Pool) Execute(ctx context.Context, work func(ctx context.Context)) error {
	return p.ExecuteOwned(ctx, work, nil)
}

// ExecuteOwned is Execute for work whose results need an owner once its caller has gone (a
// response body to close, a buffer to give back). When it returns an error matching
// ErrDetached, orphaned is called once, on the worker, as soon as work has returned, panicked
// or called runtime.Goexit, and what work produced is orphaned's. It is never called otherwise:
// after a nil or *PanicError return what work produced is the caller's, and after any other
// error work never ran. The Pool decides alone which of the two it is, so neither side needs
// a lock or a flag of its own to agree with the other.
//
// orphaned runs as part of the work: it keeps the worker's slot until it returns, and a panic
// in it is logged as a detached work's. A nil orphaned makes ExecuteOwned Execute.
func (p *Pool) ExecuteOwned(ctx context.Context, work func(ctx context.Context), orphaned func()) error {
	if p.acquire(false) {
		j := p.newJob(ctx, work, orphaned)
		if p.workers.Submit(j.task) != nil { // only once Close released the ants pool
			p.slots.Add(-1)
			p.recycle(j)
			return ErrClosed
		}
		return p.wait(ctx, j, false)
	}
	if p.slots.Load()&(slotsClosing|slotsSealed) != 0 {
		return ErrClosed
	}
	if p.raceHook != nil {
		p.raceHook(callerFull)
	}
	j := p.newJob(ctx, work, orphaned)
	if err := p.queue.push(j); err != nil {
		p.recycle(j)
		if err == ErrRejected {
			p.rejected.Add(1)
		}
		return err
	}
	// Every slot was taken a moment ago, but a worker may have released its slot after
	// looking at the (then empty) queue. See serve.
	if p.acquire(true) {
		p.startWorker()
	}
	return p.wait(ctx, j, true)
}

// acquire takes a slot if one is free. Execute's own calls (draining false) are refused once
// Close has begun; calls that keep the queue moving (draining true) only once it is sealed.
func (p *Pool) acquire(draining bool) bool {
	stop := int64(slotsClosing | slotsSealed)
	if draining {
		stop = slotsSealed
	}
	for {
		w := p.slots.Load()
		if w&stop != 0 || w&slotsCount >= p.size.Load() {
			return false
		}
		if p.raceHook != nil {
			p.raceHook(sizeRead)
		}
		if p.slots.CompareAndSwap(w, w+1) {
			n := w&slotsCount + 1
			// The size is read again after the slot is taken: a Resize that shrank
			// it between the first read and the swap (once its drain was seen, it
			// promises that no slot is taken above the new size) gets the slot back.
			if n > p.size.Load() {
				p.slots.Add(-1)
				return false
			}
			for m := p.largest.Load(); n > m && !p.largest.CompareAndSwap(m, n); m = p.largest.Load() {
			}
			return true
		}
	}
}

// startWorker gives the slot just acquired to a new worker that starts with the queue.
func (p *Pool) startWorker() {
	if p.workers.Submit(p.startQueue) != nil { // only once Close released the ants pool
		p.slots.Add(-1)
	}
}

// serve is the worker: it runs j (nil to start with the queue), then queued calls, while it
// holds one slot.
//
// A caller learns its result only once the slot is free again or handed on to the next queued
// call, so that a caller calling again at once is not refused by its own finished call: after
// each call the worker takes the next queued call (keeping its slot) or releases its slot, and
// only then publishes the result.
//
// No lost wake-up: a worker releases its slot and then reads the queue length; Execute pushes
// (queue length +1) and then tries to take a slot. All four are sequentially consistent
// atomics, so either the worker sees the pushed call and takes a slot back to run it, or
// Execute sees the released slot and starts a worker. When the worker's re-acquire fails,
// every slot is held by a worker that will pass through this same check, or the pool is
// sealed and Close flushes the queue.
func (p *Pool) serve(j *job) {
	for {
		publish, from, err := false, jobPending, error(nil)
		if j != nil {
			publish, from, err = p.run(j)
		}
		next := (*job)(nil)
		if p.slots.Load()&slotsCount <= p.size.Load() { // not shrinking
			next = p.queue.pop()
		}
		if publish && from == jobReturned && j.state.Load() == jobAbandoned {
			// Nobody waits for detached work: count it out before its slot is free,
			// so that Detached never exceeds the calls running.
			p.finish(j, from, err)
			publish = false
		}
		if next == nil {
			if p.raceHook != nil {
				p.raceHook(workerIdle)
			}
			p.slots.Add(-1)
		}
		if publish {
			p.finish(j, from, err)
		}
		if next == nil && !p.reacquire() {
			return
		}
		j = next
	}
}

// reacquire is a worker's check after it released its slot: it takes a slot back and reports
// true when a call was queued meanwhile (see serve).
func (p *Pool) reacquire() bool {
	return p.queue.n.Load() > 0 && p.acquire(true)
}

// run runs one job unless its caller has already gone. It returns the result for finish: from
// is jobReturned when the work ran, jobPending when it was dropped because its context had
// ended. publish is false when the caller gave up before the start: j is recycled, and there
// is nothing to publish.
func (p *Pool) run(j *job) (publish bool, from int32, err error) {
	if err := j.ctx.Err(); err != nil {
		return true, jobPending, dropped(err)
	}
	if !j.state.CompareAndSwap(jobPending, jobStarted) {
		p.recycle(j) // the caller gave up before the work started
		return false, jobPending, nil
	}
	return true, jobReturned, p.call(j)
}

// call runs the work (see work) and recovers a panic. If work or orphaned calls runtime.Goexit
// this goroutine ends after the deferred function, which therefore does the worker's part: it
// releases the slot, publishes the result, and starts a worker for a call queued meanwhile.
func (p *Pool) call(j *job) (err error) {
	returned := false
	defer func() {
		if v := recover(); v != nil {
			err = NewPanicError(v)
			return
		}
		if returned {
			return
		}
		p.slots.Add(-1)
		p.finish(j, jobReturned, NewPanicError(goexitValue))
		if p.reacquire() {
			p.startWorker()
		}
	}()
	p.work(j)
	returned = true
	return nil
}

// work runs the job's work and then, however it ended (returned, panicked or called
// runtime.Goexit), settles who owns what it produced (job.settle). It runs inside call's
// recovery, so a panic or Goexit in orphaned is handled as one in work.
func (p *Pool) work(j *job) {
	defer j.settle()
	j.work(j.ctx)
}

// settle decides, once the work has ended, who owns what it produced: the caller, if it still
// waits (started → returned: the caller can no longer leave; it takes the result, published as
// soon as the worker has passed its slot on), or orphaned, if the caller's started → abandoned
// came first (from then on only this goroutine touches the job). That one CompareAndSwap is
// the only decision; nobody else keeps a flag of their own.
func (j *job) settle() {
	if !j.state.CompareAndSwap(jobStarted, jobReturned) && j.orphaned != nil {
		j.orphaned()
	}
}

// finish publishes the job's result (from is jobReturned when the work ran, jobPending when it
// was dropped). If the caller is still waiting it gets the result and recycles the job;
// otherwise the caller is gone and finish recycles the job itself.
func (p *Pool) finish(j *job, from int32, err error) {
	if from == jobReturned {
		p.completed.Add(1)
	}
	j.err = err
	if j.state.CompareAndSwap(from, jobFinished) {
		j.done <- struct{}{} // never blocks (see job.done); j belongs to the caller from here
		return
	}
	if from == jobReturned {
		p.detached.Add(-1)
		if pe, ok := err.(*PanicError); ok {
			p.log().Error("isolation: detached work panicked",
				slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))
		}
	}
	p.recycle(j)
}

// wait waits for the job's result or for the caller's context to end.
func (p *Pool) wait(ctx context.Context, j *job, queued bool) error {
	if dl, ok := ctx.(*deadline.Context); ok {
		return p.waitDeadline(dl, j, queued)
	}
	done := ctx.Done()
	if done == nil { // the context never ends
		<-j.done
		return p.collect(j)
	}
	select {
	case <-j.done:
		return p.collect(j)
	case <-done:
		return p.abandon(j, queued)
	}
}

// waitDeadline is wait for a context with a deadline of bulwark's own, without asking for its
// Done channel (which would arm a timer of its own, and allocate): the Pool's watch wakes the
// caller at the deadline with a signal on the job's done channel, the one the worker's result
// comes on (a plain receive costs less than a select; the caller selects only on a parent that
// can end). The watch's remove then tells which signal came: if the job was still watched, the
// result's; if not, the watch's, unless the result is also there (jobFinished), whose signal
// is then taken too. At the deadline the caller ends the context (Expire), so that work that
// selects on it wakes. The job leaves the watch, and its done channel holds no signal of the
// watch's, before it can change hands.
func (p *Pool) waitDeadline(dl *deadline.Context, j *job, queued bool) error {
	p.watch.add(j, dl.Due())
	if parent := dl.ParentDone(); parent != nil {
		select {
		case <-j.done:
		case <-parent:
			if !p.watch.remove(j) {
				<-j.done // one signal of the two that may come: abandon waits for the other
			}
			return p.abandon(j, queued)
		}
	} else {
		<-j.done
	}
	if p.watch.remove(j) {
		return p.collect(j)
	}
	if j.state.Load() == jobFinished {
		<-j.done
		return p.collect(j)
	}
	// The signal was the watch's: a signal of the worker's comes only after jobFinished.
	dl.Expire()
	return p.abandon(j, queued)
}

// collect returns the result of a finished job and recycles it.
func (p *Pool) collect(j *job) error {
	err := j.err
	p.recycle(j)
	return err
}

// abandon is the caller leaving because its context ended. A queued job is unlinked and never
// runs; otherwise the state word decides between dropped (not started), detached (running)
// and a result that arrived meanwhile (the work returned: the caller takes its result, which
// the worker publishes as soon as it has passed its slot on).
func (p *Pool) abandon(j *job, queued bool) error {
	cause := j.ctx.Err()
	if queued && p.queue.remove(j) {
		p.recycle(j)
		return dropped(cause)
	}
	for {
		switch j.state.Load() {
		case jobPending:
			if j.state.CompareAndSwap(jobPending, jobAbandoned) {
				return dropped(cause)
			}
		case jobStarted:
			// Count after the swap: counting before it overstated the gauge whenever the
			// swap then failed. The worker's decrement may now come first; Stats reads
			// that brief -1 as 0, which is the truth then (the work has returned).
			if j.state.CompareAndSwap(jobStarted, jobAbandoned) {
				p.detached.Add(1)
				return detached(cause)
			}
		case jobReturned, jobFinished:
			<-j.done
			return p.collect(j)
		}
	}
}

func (p *Pool) newJob(ctx context.Context, work func(context.Context), orphaned func()) *job {
	j := p.jobs.Get().(*job)
	j.ctx, j.work, j.orphaned = ctx, work, orphaned
	return j
}

func (p *Pool) recycle(j *job) {
	j.ctx, j.work, j.orphaned, j.err = nil, nil, nil, nil
	j.state.Store(jobPending)
	p.jobs.Put(j)
}

// Resize sets the number of workers and the queue capacity, both taking effect at once. Work
// already running or queued is kept: on shrinking, workers above the new size leave after
// their current call and the queue refuses calls until it is below the new capacity; on
// growing, queued calls start at once. size must be at least 1 and queue at least 0 (0: no
// queue); otherwise the error wraps ErrInvalidConfig. After Close it returns ErrClosed.
func (p *Pool) Resize(size, queue int) error {
	if err := checkRange("size", size, 1); err != nil {
		return err
	}
	if err := checkRange("queue", queue, 0); err != nil {
		return err
	}
	p.resizeMu.Lock()
	defer p.resizeMu.Unlock()
	if p.slots.Load()&(slotsClosing|slotsSealed) != 0 {
		return ErrClosed
	}
	p.size.Store(int64(size))
	p.queue.setCapacity(queue)
	for n := p.queue.n.Load(); n > 0 && p.acquire(true); n-- {
		p.startWorker()
	}
	return nil
}

// Stats returns the Pool's gauges and counters.
func (p *Pool) Stats() Stats {
	return Stats{
		Capacity:      int(p.size.Load()),
		QueueCapacity: p.queue.getCapacity(),
		Active:        int(p.slots.Load() & slotsCount),
		Queued:        int(p.queue.n.Load()),
		Detached:      int(max(p.detached.Load(), 0)),
		LargestActive: int(p.largest.Load()),
		Completed:     p.completed.Load(),
		Rejected:      p.rejected.Load(),
	}
}

// Close stops admitting calls (Execute returns ErrClosed from then on) and waits until the
// queued and running calls have finished, detached ones included, or ctx ends.
//
// When everything finished it releases the workers, waits for their goroutines to exit (a
// wait that no call can prolong, so it is not bounded by ctx: Close returns nil even if ctx
// ended meanwhile or had already ended) and returns nil; on shared Workers
// (PoolConfig.Workers) the goroutines go back to them instead, and Workers.Close ends them.
// When ctx ends first it drops the calls still queued (their callers get an error matching
// ErrDropped and ErrClosed), releases the workers and returns a *CloseError with the number of
// calls dropped and still running; each running call keeps its goroutine until its work
// returns. A second Close returns ErrClosed.
func (p *Pool) Close(ctx context.Context) error {
	if !p.closeOnce.CompareAndSwap(false, true) {
		return ErrClosed
	}
	p.resizeMu.Lock()
	p.queue.close()
	p.slots.Or(slotsClosing)
	p.resizeMu.Unlock()

	if err := p.drain(ctx); err != nil {
		n := p.flush()
		running := int(p.slots.Load() & slotsCount)
		p.release(running > 0)
		if n == 0 && running == 0 {
			return nil
		}
		return &CloseError{Dropped: n, Running: running, Err: err}
	}
	if p.shared != nil {
		p.shared.detach(false)
		return nil
	}
	// No call is left: the workers only have to exit, which they do at
	// once, so this wait is not bounded by ctx (an ended ctx must not turn
	// a clean close into an error, nor leave their goroutines behind).
	if err := p.workers.ReleaseContext(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("isolation: close: waiting for idle workers to exit: %w", err)
	}
	return nil
}

// release lets the workers go once Close has cut calls off (running: some still run): the
// Pool's own at once, or, for shared Workers, by telling them so.
func (p *Pool) release(running bool) {
	if p.shared != nil {
		p.shared.detach(running)
		return
	}
	p.workers.Release()
}

// drain waits until no slot is held and the queue is empty, then seals the pool (in the same
// CompareAndSwap, so no slot can be taken in between). If ctx ends first it seals the pool
// anyway and returns ctx.Err().
func (p *Pool) drain(ctx context.Context) error {
	err := pollUntil(ctx, func() bool {
		w := p.slots.Load()
		return w&slotsCount == 0 && p.queue.n.Load() == 0 && p.slots.CompareAndSwap(w, w|slotsSealed)
	})
	if err != nil {
		p.slots.Or(slotsSealed)
	}
	return err
}

// flush drops every queued call (the pool is sealed and the queue closed, so none can come
// back) and returns how many there were.
func (p *Pool) flush() int {
	n := 0
	for j := p.queue.takeAll(); j != nil; n++ {
		next := j.links[queueList].next
		j.links[queueList] = link{}
		p.finish(j, jobPending, errDroppedClosed)
		j = next
	}
	return n
}

func (p *Pool) log() *slog.Logger {
	if p.logger != nil {
		return p.logger
	}
	return slog.Default()
}

// antsLogger sends ants' own log lines (it logs only panics that escape a worker, which the
// Pool recovers before ants sees them) to the Pool's or the Workers' logger.
type antsLogger struct{ log func() *slog.Logger }

func (l antsLogger) Printf(format string, args ...any) {
	l.log().Error("isolation: ants: " + fmt.Sprintf(format, args...))
}
