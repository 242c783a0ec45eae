// Command timeouts measures each library's timeout path: a Run that ignores its context and takes
// 50 ms, under a 5 ms timeout. It reports how long the caller waited, how many goroutines were
// alive during and after, and whether a bulkhead of 2 kept its bound when 10 such calls arrive at
// once (burst) or one every 8 ms (staggered, so early calls time out while later ones arrive).
//
//	go run ./cmd/timeouts          # 20 sequential calls per library
//	go run ./cmd/timeouts -quick   # 5 calls per library
//
// It prints markdown tables on stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/bench/internal/stat"
)

const (
	workTime = 50 * time.Millisecond
	timeout  = 5 * time.Millisecond
	limit    = 2
	fired    = 10
	stagger  = 8 * time.Millisecond
)

// Outcome classes reported per call.
const (
	outOK       = "ok"
	outTimeout  = "timeout"
	outRejected = "rejected"
	outOther    = "other"
)

// instance is one configured executor of a library: a bulkhead of `limit` and a `timeout`.
type instance struct {
	// call runs work under the library's protection and returns what the caller got.
	call func(ctx context.Context, work func(context.Context)) error
	// classify maps an error from call to one of the outcome classes.
	classify func(error) string
	// close releases the instance's resources; nil if the library has no way to do it.
	close func()
}

// subject is a library under test.
type subject struct {
	name string
	open func(limit int, timeout time.Duration) (instance, error)
}

// probe counts work in flight.
type probe struct {
	running, maxRunning, started, finished atomic.Int64
}

func (p *probe) enter() {
	p.started.Add(1)
	n := p.running.Add(1)
	for {
		m := p.maxRunning.Load()
		if n <= m || p.maxRunning.CompareAndSwap(m, n) {
			return
		}
	}
}

func (p *probe) exit() {
	p.running.Add(-1)
	p.finished.Add(1)
}

// ignoring is the work under test: it ignores its context and takes workTime.
func (p *probe) ignoring(context.Context) {
	p.enter()
	defer p.exit()
	time.Sleep(workTime)
}

// cooperative is the same work, but it returns when its context ends.
func (p *probe) cooperative(ctx context.Context) {
	p.enter()
	defer p.exit()
	t := time.NewTimer(workTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// settle waits until every started work item has finished, then a little more so goroutines that
// only wake up to exit (timers, hand-off goroutines) are gone.
func (p *probe) settle() {
	deadline := time.Now().Add(2 * time.Second)
	for (p.running.Load() > 0 || p.started.Load() != p.finished.Load()) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}

func goroutinesNow() int {
	runtime.GC()
	return runtime.NumGoroutine()
}

type waitResult struct {
	p50, max     time.Duration
	outcomes     map[string]int
	during       int // most goroutines above the baseline right after a caller returned
	idle, closed int // goroutines above the baseline once all work ended; after close (-1: no close)
	coopP50      time.Duration
}

// measureWait makes n sequential calls, letting each one's work finish before the next.
func measureWait(s subject, n int) (waitResult, error) {
	res := waitResult{outcomes: map[string]int{}, closed: -1}
	base := goroutinesNow()
	inst, err := s.open(limit, timeout)
	if err != nil {
		return res, err
	}
	var p probe
	waits := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		err := inst.call(context.Background(), p.ignoring)
		waits = append(waits, time.Since(start))
		res.during = max(res.during, runtime.NumGoroutine()-base)
		res.outcomes[inst.classify(err)]++
		p.settle()
	}
	res.p50, res.max = stat.Percentile(waits, 50), stat.Max(waits)
	time.Sleep(100 * time.Millisecond)
	res.idle = goroutinesNow() - base

	coop := waits[:0]
	for range n {
		start := time.Now()
		_ = inst.call(context.Background(), p.cooperative)
		coop = append(coop, time.Since(start))
		p.settle()
	}
	res.coopP50 = stat.Percentile(coop, 50)

	if inst.close != nil {
		inst.close()
		time.Sleep(100 * time.Millisecond)
		res.closed = goroutinesNow() - base
	}
	return res, nil
}

type boundResult struct {
	maxRunning int64
	outcomes   map[string]int
	maxWait    time.Duration
}

// measureBound fires `fired` calls at a fresh instance, gap apart (0: all at once), and reports
// how many ran at once.
func measureBound(s subject, gap time.Duration) (boundResult, error) {
	res := boundResult{outcomes: map[string]int{}}
	inst, err := s.open(limit, timeout)
	if err != nil {
		return res, err
	}
	var (
		p     probe
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range fired {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			time.Sleep(time.Duration(i) * gap)
			t0 := time.Now()
			err := inst.call(context.Background(), p.ignoring)
			d := time.Since(t0)
			mu.Lock()
			res.outcomes[inst.classify(err)]++
			res.maxWait = max(res.maxWait, d)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	p.settle()
	res.maxRunning = p.maxRunning.Load()
	if inst.close != nil {
		inst.close()
	}
	return res, nil
}

func outcomes(m map[string]int) string {
	s := ""
	for _, k := range []string{outOK, outTimeout, outRejected, outOther} {
		if m[k] > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%d %s", m[k], k)
		}
	}
	return s
}

func closedCell(n int) string {
	if n < 0 {
		return "no close"
	}
	return strconv.Itoa(n)
}

func main() {
	quick := flag.Bool("quick", false, "5 calls per library instead of 20")
	flag.Parse()
	n := 20
	if *quick {
		n = 5
	}
	subjects := append(bulwarkSubjects(), peerSubjects()...)

	var waitRows, boundRows [][]string
	for _, s := range subjects {
		w, err := measureWait(s, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, s.name, err)
			os.Exit(1)
		}
		waitRows = append(waitRows, []string{s.name, stat.Ms(w.p50), stat.Ms(w.max), outcomes(w.outcomes),
			strconv.Itoa(w.during), strconv.Itoa(w.idle), closedCell(w.closed), stat.Ms(w.coopP50)})
		burst, err := measureBound(s, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, s.name, err)
			os.Exit(1)
		}
		stag, err := measureBound(s, stagger)
		if err != nil {
			fmt.Fprintln(os.Stderr, s.name, err)
			os.Exit(1)
		}
		boundRows = append(boundRows, []string{s.name,
			strconv.FormatInt(burst.maxRunning, 10), outcomes(burst.outcomes), stat.Ms(burst.maxWait),
			strconv.FormatInt(stag.maxRunning, 10), outcomes(stag.outcomes), stat.Ms(stag.maxWait)})
	}

	fmt.Printf("#### Caller wait: Run ignores its context and takes %v, timeout %v, %d sequential calls\n\n", workTime, timeout, n)
	stat.Table(os.Stdout, []string{"library", "wait p50 ms", "wait max ms", "outcomes", "goroutines during",
		"goroutines idle after", "goroutines after close", "wait p50 ms if Run honours ctx"}, waitRows)
	fmt.Printf("\nGoroutines are counted above the count before the instance was created; \"during\" is the most seen right after a caller returned (its work still running).\n\n")
	fmt.Printf("#### Bulkhead bound: limit %d, %d calls of that work, all at once (burst) or one every %v (staggered)\n\n", limit, fired, stagger)
	stat.Table(os.Stdout, []string{"library", "burst: most running at once", "burst outcomes", "burst max wait ms",
		"staggered: most running at once", "staggered outcomes", "staggered max wait ms"}, boundRows)
	fmt.Println()
}

// errorsIs reports whether err matches any of targets.
func errorsIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
