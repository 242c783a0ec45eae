package deadline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine (a timer's callback, a
// parent's AfterFunc) behind once its contexts are cancelled.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long a test waits for something that should happen at once
// or at a short deadline, on a loaded machine.
const bound = 10 * time.Second

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(bound):
		t.Fatal("Done not closed within 10 s")
	}
}

func notDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("Done closed early (Err %v)", ctx.Err())
	default:
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err = %v while live", err)
	}
}

func TestDeadlineFiresDone(t *testing.T) {
	c := New(context.Background(), 20*time.Millisecond)
	defer c.Cancel()
	start := time.Now()
	waitDone(t, c)
	if waited := time.Since(start); waited < 15*time.Millisecond {
		t.Errorf("Done closed after %v, before the 20 ms deadline", waited)
	}
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err = %v, want DeadlineExceeded", err)
	}
	if !c.Expired() {
		t.Error("Expired = false after the deadline")
	}
	if err := context.Cause(c); err != context.DeadlineExceeded {
		t.Errorf("Cause = %v, want DeadlineExceeded", err)
	}
}

func TestErrWithoutDoneReadsTheClock(t *testing.T) {
	c := New(context.Background(), time.Millisecond)
	defer c.Cancel()
	time.Sleep(5 * time.Millisecond)
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err = %v, want DeadlineExceeded", err)
	}
	// Done made after the end is closed at once.
	select {
	case <-c.Done():
	default:
		t.Fatal("Done of an ended context not closed")
	}
	c.Cancel()
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err after Cancel = %v, want DeadlineExceeded (the first end stays)", err)
	}
}

// TestNewAtAndErrAtTakeTheCallersReadings: NewAt counts the timeout from
// the reading it is given, and ErrAt judges the deadline at the reading it
// is given, not at the clock (here an hour away from both); an end ErrAt
// finds stays, as one Err finds does.
func TestNewAtAndErrAtTakeTheCallersReadings(t *testing.T) {
	now := Now() - time.Hour
	c := NewAt(context.Background(), now, time.Second)
	defer c.Cancel()
	if c.Due() != now+time.Second {
		t.Fatalf("Due = %v, want %v", c.Due(), now+time.Second)
	}
	if err := c.ErrAt(now + time.Second - 1); err != nil {
		t.Fatalf("ErrAt a nanosecond before the deadline = %v, want nil", err)
	}
	if err := c.ErrAt(now + time.Second); err != context.DeadlineExceeded || !c.Expired() {
		t.Fatalf("ErrAt the deadline = %v (Expired %v), want DeadlineExceeded", err, c.Expired())
	}
	if err := c.ErrAt(now); err != context.DeadlineExceeded {
		t.Errorf("ErrAt an earlier reading after the end = %v, want DeadlineExceeded (the end stays)", err)
	}

	parent, cancel := context.WithCancel(context.Background())
	later := NewAt(parent, Now()+time.Hour, time.Second)
	defer later.Cancel()
	if err := later.Err(); err != nil {
		t.Fatalf("Err of a deadline counted from an hour ahead = %v, want nil", err)
	}
	cancel()
	if err := later.ErrAt(Now()); err != context.Canceled || later.Expired() {
		t.Errorf("ErrAt after the parent's end = %v (Expired %v), want the parent's Canceled", err, later.Expired())
	}
}

func TestDoneAfterTheDeadlineIsClosedAtOnce(t *testing.T) {
	c := New(context.Background(), time.Millisecond)
	defer c.Cancel()
	time.Sleep(5 * time.Millisecond)
	select {
	case <-c.Done():
	default:
		t.Fatal("Done made after the deadline is not closed on return")
	}
	if !c.Expired() {
		t.Error("not Expired")
	}
}

func TestParentCancelPropagates(t *testing.T) {
	cause := errors.New("client went away")
	parent, cancel := context.WithCancelCause(context.Background())
	c := New(parent, time.Hour)
	defer c.Cancel()
	notDone(t, c)
	cancel(cause)
	waitDone(t, c)
	if err := c.Err(); err != context.Canceled {
		t.Errorf("Err = %v, want Canceled", err)
	}
	if c.Expired() {
		t.Error("Expired after the parent's cancel")
	}
	if err := context.Cause(c); err != cause {
		t.Errorf("Cause = %v, want the parent's cause", err)
	}
}

func TestParentCancelWithoutDone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := New(parent, time.Hour)
	defer c.Cancel()
	cancel()
	if err := c.Err(); err != context.Canceled {
		t.Fatalf("Err = %v, want Canceled", err)
	}
	if c.Expired() {
		t.Error("Expired after the parent's cancel")
	}
}

func TestParentDeadlineEarlier(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	pd, _ := parent.Deadline()
	c := New(parent, time.Hour)
	defer c.Cancel()
	if d, ok := c.Deadline(); !ok || !d.Equal(pd) {
		t.Errorf("Deadline = %v, %v; want the parent's %v", d, ok, pd)
	}
	waitDone(t, c)
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err = %v, want DeadlineExceeded", err)
	}
	if c.Expired() {
		t.Error("Expired, but the parent's deadline ended it")
	}
}

func TestOwnDeadlineEarlier(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	before := time.Now()
	c := New(parent, time.Second)
	defer c.Cancel()
	d, ok := c.Deadline()
	if !ok || d.Before(before.Add(time.Second)) || d.After(time.Now().Add(time.Second)) {
		t.Errorf("Deadline = %v, %v; want about a second from now", d, ok)
	}
}

// TestBothPassedUnobserved: the parent's deadline and c's both passed
// before anything looked; the earlier one wins.
func TestBothPassedUnobserved(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parent, own time.Duration
		wantExpired bool
		wantErr     error
	}{
		{"own earlier", 5 * time.Millisecond, time.Millisecond, true, context.DeadlineExceeded},
		{"parent earlier", time.Millisecond, 5 * time.Millisecond, false, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithTimeout(context.Background(), tc.parent)
			defer cancel()
			c := New(parent, tc.own)
			defer c.Cancel()
			<-parent.Done()
			time.Sleep(10 * time.Millisecond)
			if err := c.Err(); err != tc.wantErr {
				t.Errorf("Err = %v, want %v", err, tc.wantErr)
			}
			if c.Expired() != tc.wantExpired {
				t.Errorf("Expired = %v, want %v", c.Expired(), tc.wantExpired)
			}
		})
	}
}

func TestCancelBeforeDone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(parent, time.Hour)
	c.Cancel()
	if err := c.Err(); err != context.Canceled {
		t.Fatalf("Err = %v, want Canceled", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done of a cancelled context not closed")
	}
	if err := context.Cause(c); err != context.Canceled {
		t.Errorf("Cause = %v, want Canceled", err)
	}
	cancel() // the parent ending later changes nothing
	if err := context.Cause(c); err != context.Canceled {
		t.Errorf("Cause after the parent's cancel = %v, want Canceled", err)
	}
}

func TestCancelAfterDone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(parent, time.Hour)
	d := c.Done()
	notDone(t, c)
	c.Cancel()
	select {
	case <-d:
	default:
		t.Fatal("Done not closed by Cancel")
	}
	if err := c.Err(); err != context.Canceled {
		t.Errorf("Err = %v, want Canceled", err)
	}
	if c.Expired() {
		t.Error("Expired after Cancel")
	}
	c.Cancel() // twice is fine
}

// TestCauseAfterDeadlineThenParentCancel: a detached Run that asks Cause
// after its deadline, once the caller's request ended too, still learns it
// was the deadline.
func TestCauseAfterDeadlineThenParentCancel(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	c := New(parent, time.Millisecond)
	defer c.Cancel()
	waitDone(t, c)
	cancel(errors.New("request over"))
	if err := context.Cause(c); err != context.DeadlineExceeded {
		t.Errorf("Cause = %v, want DeadlineExceeded", err)
	}
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err = %v, want DeadlineExceeded", err)
	}
}

func TestCauseNilWhileLive(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(parent, time.Hour)
	defer c.Cancel()
	if err := context.Cause(c); err != nil {
		t.Errorf("Cause = %v while live", err)
	}
}

func TestCauseKeyFound(t *testing.T) {
	if causeKey == nil {
		t.Fatal("the key context.Cause asks was not found: Cause falls back to the parent's")
	}
}

func TestDoneConcurrently(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(parent, 30*time.Millisecond)
	defer c.Cancel()
	const n = 32
	chans := make([]<-chan struct{}, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := c.Done()
			chans[i] = d
			<-d
		}()
	}
	wg.Wait()
	for i, d := range chans {
		if d != chans[0] {
			t.Fatalf("goroutine %d got another channel", i)
		}
	}
	if !c.Expired() {
		t.Errorf("not Expired: Err %v", c.Err())
	}
}

// TestConcurrentEnds races Done, Err, Cancel, Expire and the parent's
// cancel: exactly one end wins, Done closes once, and Err agrees with it.
func TestConcurrentEnds(t *testing.T) {
	for range 200 {
		parent, cancel := context.WithCancel(context.Background())
		c := New(parent, time.Millisecond)
		var wg sync.WaitGroup
		for _, f := range []func(){
			func() { <-c.Done() }, c.Cancel, c.Expire, cancel,
			func() { _ = c.Err() }, func() { _ = c.AfterFunc(func() {}) },
		} {
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
		}
		wg.Wait()
		waitDone(t, c)
		err := c.Err()
		if err != context.Canceled && err != context.DeadlineExceeded {
			t.Fatalf("Err = %v", err)
		}
		if c.Expired() != (err == context.DeadlineExceeded) {
			t.Fatalf("Expired = %v with Err %v", c.Expired(), err)
		}
		cancel()
	}
}

type key struct{}

func TestValueDelegates(t *testing.T) {
	parent := context.WithValue(context.Background(), key{}, "tenant-7")
	c := New(parent, time.Hour)
	defer c.Cancel()
	if v := c.Value(key{}); v != "tenant-7" {
		t.Errorf("Value = %v, want the parent's", v)
	}
	c.Cancel()
	if v := c.Value(key{}); v != "tenant-7" {
		t.Errorf("Value after Cancel = %v, want the parent's", v)
	}
}

func TestExpireWithoutTimer(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(parent, time.Hour)
	defer c.Cancel()
	d := c.Done()
	c.Expire()
	select {
	case <-d:
	default:
		t.Fatal("Done not closed by Expire")
	}
	if !c.Expired() || c.Err() != context.DeadlineExceeded {
		t.Errorf("Expired %v, Err %v", c.Expired(), c.Err())
	}
}

func TestExpireAfterParentCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := New(parent, time.Hour)
	defer c.Cancel()
	cancel()
	c.Expire()
	if c.Expired() || c.Err() != context.Canceled {
		t.Errorf("Expired %v, Err %v: the parent ended first", c.Expired(), c.Err())
	}
}

func TestStdlibAfterFunc(t *testing.T) {
	c := New(context.Background(), time.Hour)
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	stopped := New(context.Background(), time.Hour)
	stop := context.AfterFunc(stopped, func() { t.Error("a stopped AfterFunc ran") })
	if !stop() {
		t.Error("stop = false before the end")
	}
	if stop() {
		t.Error("stop = true the second time")
	}
	stopped.Cancel()
	c.Cancel()
	select {
	case <-ran:
	case <-time.After(bound):
		t.Fatal("AfterFunc did not run")
	}
	late := context.AfterFunc(c, func() {}) // claimed before AfterFunc returns: no wait needed
	if late() {
		t.Error("stop = true for an AfterFunc registered after the end")
	}
}

// TestDerivedContext: a context.WithCancel of c ends with it, with c's
// cause, and costs no goroutine (c has an AfterFunc method).
func TestDerivedContext(t *testing.T) {
	c := New(context.Background(), 10*time.Millisecond)
	defer c.Cancel()
	child, cancel := context.WithCancel(c)
	defer cancel()
	waitDone(t, child)
	if err := child.Err(); err != context.DeadlineExceeded {
		t.Errorf("child Err = %v", err)
	}
	if err := context.Cause(child); err != context.DeadlineExceeded {
		t.Errorf("child Cause = %v", err)
	}
}

// TestNoGoroutineLeftAfterCancel: an armed context whose parent can end
// leaves nothing behind once cancelled (goleak checks, as TestMain does at
// the end).
func TestNoGoroutineLeftAfterCancel(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A parent of a type package context does not know costs a goroutine
	// per registration (context.AfterFunc's), which Cancel must end too.
	foreign := opaque{parent}
	for range 100 {
		for _, p := range []context.Context{parent, foreign} {
			c := New(p, time.Hour)
			_ = c.Done()
			c.Cancel()
		}
	}
	goleak.VerifyNone(t)
}

// opaque hides its context's type from package context.
type opaque struct{ context.Context }

// TestNoAllocationUntilDone: New, Err and Cancel cost the Context alone.
func TestNoAllocationUntilDone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := testing.AllocsPerRun(100, func() {
		c := New(parent, time.Second)
		if c.Err() != nil {
			t.Fatal("ended at once")
		}
		c.Cancel()
	})
	if allocs != 1 {
		t.Errorf("allocs = %v, want 1 (the Context)", allocs)
	}
}

func TestHugeTimeout(t *testing.T) {
	c := New(context.Background(), time.Duration(1<<63-1))
	defer c.Cancel()
	notDone(t, c)
	if d, ok := c.Deadline(); !ok || d.Before(time.Now().Add(100*365*24*time.Hour)) {
		t.Errorf("Deadline = %v, %v: want far away", d, ok)
	}
}
