package command

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command/adaptive"
	"github.com/bulwark-go/bulwark/command/hedge"
	"github.com/bulwark-go/bulwark/command/priority"
	"github.com/bulwark-go/bulwark/command/retry"
	"github.com/bulwark-go/bulwark/command/throttle"
	"github.com/bulwark-go/bulwark/internal/cacheline"
	"github.com/bulwark-go/bulwark/internal/windowed"
	"github.com/bulwark-go/bulwark/internal/wrap"
	"github.com/bulwark-go/bulwark/isolation"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/ratelimit"
)

// The defaults of GroupConfig, after Hystrix (its field docs give them).
const (
	defaultTimeout       = time.Second // execution.isolation.thread.timeoutInMilliseconds
	defaultMaxConcurrent = 10          // coreSize / maxConcurrentRequests
	defaultFallbackLimit = 10          // fallback.isolation.semaphore.maxConcurrentRequests
	defaultMaxCommands   = 1000        // command names per group, see GroupConfig.MaxCommands
)

// overflowCommand is the name of the command that takes the calls of new
// command names once a group has GroupConfig.MaxCommands of them.
const overflowCommand = "(overflow)"

// Strategy is how a group isolates its calls.
type Strategy uint8

// The strategies. The zero value is Thread, Hystrix's default.
const (
	// Thread runs each call on a worker of the group's goroutine pool
	// (isolation.Pool). At the deadline the caller is answered at once; a
	// Run that ignores its context keeps its worker, not its caller.
	Thread Strategy = iota
	// Semaphore runs each call on the caller's goroutine under a counting
	// semaphore (isolation.Semaphore). It is cheaper, but a Run that ignores
	// its context keeps the caller past the deadline (the call then counts
	// as TIMEOUT).
	Semaphore
)

// String returns "THREAD" or "SEMAPHORE", as the Hystrix stream spells them.
func (s Strategy) String() string {
	switch s {
	case Thread:
		return "THREAD"
	case Semaphore:
		return "SEMAPHORE"
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// GroupConfig configures a group. The zero value of every field means its
// documented default (Hystrix's), or "off" for an optional feature; a
// negative or out-of-range value is an error from NewGroup.
type GroupConfig struct {
	// Strategy selects the bulkhead. Default Thread.
	Strategy Strategy
	// MaxConcurrent is how many calls may run at once: the pool size
	// (Thread) or the number of permits (Semaphore). Default 10.
	MaxConcurrent int
	// QueueSize is how many calls may wait for a worker when all are busy
	// (Thread only; must be 0 for Semaphore). Default 0: a call that finds
	// every worker busy is rejected at once.
	QueueSize int
	// Timeout bounds each call (queue time included in Thread mode).
	// Default 1 s; NoTimeout disables it.
	Timeout time.Duration
	// FallbackLimit is how many fallbacks of the group may run at once; a
	// fallback beyond it is rejected (FALLBACK_REJECTION). Default 10.
	FallbackLimit int
	// Window is the rolling window of the group's and its commands' metrics.
	// Default 10 s in 10 buckets (per field).
	Window metrics.Window
	// Breaker configures the group-level breaker, which sees every call of
	// the group. Name and, when nil, Clock and Logger are set by the group.
	Breaker circuit.Config
	// CommandBreaker is the template of each command's own breaker (one per
	// command name). Name and, when nil, Clock and Logger are set by the
	// group. Its SlowCallDuration is also the threshold above which a
	// success (Run time) emits a SLOW event besides SUCCESS, so the metrics
	// count what the command's breaker judges slow; zero: no SLOW.
	CommandBreaker circuit.Config
	// IsBadRequest classifies errors returned by Run: true makes the call a
	// BAD_REQUEST (returned as is, no fallback, not counted against health).
	// Errors marked with BadRequest are bad requests whatever it says.
	// Default: none besides the mark.
	IsBadRequest func(err error) bool
	// Commands declares commands with their own settings; they also show in
	// snapshots before their first call. Other command names are created on
	// first use with the group's settings.
	Commands map[string]CommandConfig
	// MaxCommands caps the command names of the group (declared ones
	// included). Each name costs a breaker, a rolling window (tens of KiB)
	// and its exported metrics for the group's lifetime, so names taken from
	// request data could exhaust memory. Once the cap is reached, calls with
	// a new name run as the command "(overflow)", which has its own
	// breaker and metrics (so they stay protected and counted); the first
	// one is logged at Warn level with its name. Default 1000. The length
	// of each name is capped too, by MaxNameLength.
	MaxCommands int
	// ProbeClassifier, if set, judges the half-open probes of the group's
	// and its commands' breakers separately from normal calls: it is
	// called with Run's error for a probe that ended as FAILURE, and its
	// answer is what the probing breaker records: metrics.Success,
	// metrics.Failure or metrics.Timeout, or any other event (such as
	// metrics.Cancelled) for a probe that does not count. A TIMEOUT always fails a probe and a
	// SUCCESS always passes; the caller's answer, the metrics' primary
	// outcome and the breaker that did not probe are unchanged. Use it
	// where any answer from the dependency (even a 500) proves it
	// reachable and only a timeout or a connection failure should fail a
	// probe (httpguard.ProbeReachable is that rule for HTTP;
	// docs/policies.md tells why a team wanted it). A panic in it, or an unknown event, leaves the probe a failure and
	// is logged. Default: none, a probe is judged as any call.
	ProbeClassifier func(err error) metrics.Event
	// Alerts turns on the group's alerts (by how long a breaker has been
	// open, and on a command's degraded rate): an *alert.Watcher (package
	// alert; nothing else fits). It cannot change live. Default: nil, off.
	Alerts alerter
	// NoFallback makes the group fail loudly: Execute never calls a
	// command's Fallback, so every FAILURE, TIMEOUT, rejection or
	// short-circuit reaches the caller as an error (with FALLBACK_MISSING,
	// as for a command without one) and no value is ever degraded. For
	// writes that must never "succeed" by fallback (payments); see
	// the "never-degrade" preset. Default false.
	NoFallback bool
	// RateLimit, if set, is asked to admit every call of the group before
	// the breakers and the bulkhead; a refused call is RATE_LIMITED: it
	// falls back, is counted, and neither breaker sees it. Any package
	// ratelimit limiter fits. Default: none.
	RateLimit ratelimit.Limiter
	// KeyedRateLimit, if set, is asked after RateLimit with the call's key
	// (WithKey), for per-caller quotas: a *ratelimit.PerKey fits. Default:
	// none.
	KeyedRateLimit ratelimit.KeyedLimiter
	// DeadlineReserve, when positive, keeps that much of the caller's time
	// for the fallback: a call whose ctx has a deadline runs with the
	// deadline min(timeout, time left on the caller's deadline −
	// DeadlineReserve), so that when the caller's budget is the shorter,
	// the call ends as a TIMEOUT inside it (and falls back) instead of
	// CANCELLED with no fallback when the caller's deadline strikes. A
	// call with less than the reserve left never starts Run: it ends at
	// once as a QUEUE_TIMEOUT (not counted by the breakers) and its
	// fallback answers. A TIMEOUT cut short by the reserve counts in the breakers like any other (the
	// dependency did not answer in the time the call had), so give callers
	// budgets above the group timeout where you can. Default 0: off, the
	// call keeps the caller's deadline as is (Hystrix's behaviour, and no
	// caller's budget ever shows as the dependency's timeout).
	DeadlineReserve time.Duration
	// Retry retries the failed calls of Idempotent commands, under a retry
	// budget shared by the group's commands; see package retry. It changes
	// live through Reconfigure. Default: off.
	Retry retry.Config
	// ReadOnly puts the group in read-only mode: a write (a command whose
	// Write method says true) is refused before
	// the limiters, the breakers and the bulkhead, as READ_ONLY with
	// ErrRefused, and its fallback (one that defers the write, say) is
	// tried; reads go on. It changes live through Reconfigure (and a
	// rules file); Registry.SetReadOnly switches every group at once.
	// Default false.
	ReadOnly bool
	// InstanceWarmUp turns on warm-up per instance of the dependency: the
	// breakers do not count the outcomes of a call to an instance
	// (WithInstance) during its first InstanceWarmUp, counted from the
	// group's first call to it, so a new instance's cold caches cannot trip
	// the breakers, while the instances already warm still count and an
	// outage across the dependency still trips them. The metrics count every
	// outcome. Calls without an instance are always counted. At most
	// 1,024 instances are remembered. It changes live through
	// Reconfigure (an instance's warm-up still counts from its first call).
	// Default 0: off. (Breaker.WarmUp and Group.WarmUp warm the whole
	// breaker instead.)
	InstanceWarmUp time.Duration
	// Throttle is the group's client-side adaptive throttle: it refuses
	// calls locally (THROTTLED) in proportion to the requests the
	// dependency has not accepted lately; see package throttle. Default:
	// off.
	Throttle throttle.Config
	// Priority turns on priority shedding: when the bulkhead fills up, the
	// less important calls (WithPriority) are refused first
	// (PRIORITY_REJECTED), keeping a share of it for the more important
	// ones; see package priority. It changes live through Reconfigure.
	// Default: off.
	Priority priority.Config
	// Adaptive turns on the adaptive concurrency limit: the bulkhead's
	// size follows the dependency's latency within [Adaptive.Min,
	// Adaptive.Max] instead of staying at MaxConcurrent; see
	// package adaptive. It changes live through Reconfigure. Default: off.
	Adaptive adaptive.Config
}

// CommandConfig holds the settings of one command name in a group. Its zero
// value means "as the group": each field overrides the group's setting for
// this command only, so one slow method does not force its siblings'
// settings.
type CommandConfig struct {
	// Timeout overrides the group's timeout for this command. Default: the
	// group's; NoTimeout disables it.
	Timeout time.Duration
	// ProbeClassifier overrides the group's ProbeClassifier for this
	// command's calls. Default: the group's.
	ProbeClassifier func(err error) metrics.Event
	// Breaker, if set, configures this command's breaker instead of the
	// group's CommandBreaker template. Its Clock and Mode must be unset (the
	// command breakers all use CommandBreaker's); a nil Logger or
	// OnTransition takes the template's. Its SlowCallDuration is the
	// command's SLOW threshold (see GroupConfig.CommandBreaker).
	Breaker *circuit.Config
	// RateLimit, if set, limits this command's calls, asked after the
	// group's limiters (see GroupConfig.RateLimit). Default: none.
	RateLimit ratelimit.Limiter
	// Coalesce makes concurrent calls of this command with the same key
	// (the command's Key method: Keyer; not WithKey) share one Run, its
	// answer handed to each of them: see "Request coalescing" in the
	// package documentation. Calls without a key run alone. Only for
	// commands whose answer depends on nothing but the key. Default
	// false.
	Coalesce bool
	// Hedge, if its MaxHedges is set, hedges the calls of this command
	// when it is Idempotent: see package hedge. Default: off.
	Hedge hedge.Config
}

// withDefaults returns c with every zero field replaced by its default: the
// effective configuration (what Group.Config returns). Invalid values are
// left for Validate to report.
func (c GroupConfig) withDefaults() GroupConfig {
	c.Adaptive = adaptiveDefaults(c.Adaptive)
	if c.MaxConcurrent == 0 && adaptiveOn(&c.Adaptive) {
		c.MaxConcurrent = c.Adaptive.Max
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = defaultMaxConcurrent
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.FallbackLimit == 0 {
		c.FallbackLimit = defaultFallbackLimit
	}
	if c.MaxCommands == 0 {
		c.MaxCommands = defaultMaxCommands
	}
	c.Window = c.Window.WithDefaults()
	c.Retry = retryDefaults(c.Retry)
	return c
}

// Validate reports the first invalid field of c, naming the field and its
// value. The error wraps ErrInvalidConfig.
func (c GroupConfig) Validate() error {
	e := c.withDefaults()
	switch {
	case e.Strategy > Semaphore:
		return invalid("Strategy %d is not a known strategy", c.Strategy)
	case e.MaxConcurrent < 0 || e.MaxConcurrent > math.MaxInt32:
		return invalid("MaxConcurrent %d must be between 0 and %d", c.MaxConcurrent, math.MaxInt32)
	case e.QueueSize < 0 || e.QueueSize > math.MaxInt32:
		return invalid("QueueSize %d must be between 0 and %d", c.QueueSize, math.MaxInt32)
	case e.QueueSize > 0 && e.Strategy == Semaphore:
		return invalid("QueueSize %d is set but Strategy is SEMAPHORE (no queue)", c.QueueSize)
	case e.Timeout < 0 && e.Timeout != NoTimeout:
		return invalid("Timeout %v must not be negative (NoTimeout disables it)", c.Timeout)
	case e.FallbackLimit < 0 || e.FallbackLimit > math.MaxInt32:
		return invalid("FallbackLimit %d must be between 0 and %d", c.FallbackLimit, math.MaxInt32)
	case e.MaxCommands < 0:
		return invalid("MaxCommands %d must not be negative", c.MaxCommands)
	case e.InstanceWarmUp < 0:
		return invalid("InstanceWarmUp %v must not be negative", c.InstanceWarmUp)
	case e.MaxCommands < len(c.Commands):
		return invalid("MaxCommands %d is less than the %d declared Commands", c.MaxCommands, len(c.Commands))
	}
	if err := validateReserve(c.DeadlineReserve); err != nil {
		return err
	}
	if err := validateRetry(e.Retry); err != nil {
		return err
	}
	if err := validateThrottle(e.Throttle); err != nil {
		return err
	}
	if err := validatePriority(&e.Priority); err != nil {
		return err
	}
	if err := validateAdaptive(&e.Adaptive, c.MaxConcurrent); err != nil {
		return err
	}
	if err := e.Window.Validate(); err != nil {
		return fmt.Errorf("%w: Window {Length: %v, Buckets: %d}: %w", ErrInvalidConfig, c.Window.Length, c.Window.Buckets, err)
	}
	if err := c.Breaker.Validate(); err != nil {
		return fmt.Errorf("%w: Breaker: %w", ErrInvalidConfig, err)
	}
	if err := c.CommandBreaker.Validate(); err != nil {
		return fmt.Errorf("%w: CommandBreaker: %w", ErrInvalidConfig, err)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Commands)) {
		cc := c.Commands[name]
		if err := checkName("Commands: a command name", name); err != nil {
			return err
		}
		switch t := cc.Timeout; {
		case t < 0 && t != NoTimeout:
			return invalid("Commands[%q].Timeout %v must not be negative (NoTimeout disables it)", name, t)
		case cc.Breaker != nil && cc.Breaker.Clock != nil:
			return invalid("Commands[%q].Breaker.Clock must be nil: command breakers use CommandBreaker.Clock", name)
		case cc.Breaker != nil && cc.Breaker.Mode != circuit.Normal:
			return invalid("Commands[%q].Breaker.Mode %v must be unset: command breakers start in CommandBreaker.Mode (SetMode changes one)",
				name, cc.Breaker.Mode)
		}
		if err := validateHedge(hedgeDefaults(cc.Hedge), name); err != nil {
			return err
		}
		if cc.Breaker != nil {
			if err := cc.Breaker.Validate(); err != nil {
				return fmt.Errorf("%w: Commands[%q].Breaker: %w", ErrInvalidConfig, name, err)
			}
		}
	}
	return nil
}

// Group is one dependency (Hystrix's thread-pool key): it owns the
// bulkhead, a group-level breaker, the fallback limiter and the metrics of
// its commands. Create it with Registry.NewGroup and pass it to Execute. A
// Group is safe for concurrent use.
type Group struct {
	name     string
	reg      *Registry
	live     atomic.Pointer[liveConfig] // the effective config; replaced whole by Reconfigure
	clock    metrics.Clock
	logger   *slog.Logger
	pool     *isolation.Pool      // Thread strategy
	sem      *isolation.Semaphore // Semaphore strategy
	fallback *isolation.Semaphore
	breaker  *circuit.Breaker
	peak     *windowed.Peak // calls running at once (counts are the commands', see window)
	rejected metrics.Event  // ThreadPoolRejected or SemaphoreRejected
	hook     CallHook       // the registry's; nil: none

	// breakerClock and cmdBreakerClock are the clocks of the group's
	// breaker and of the commands' breakers when their config sets one;
	// nil (the common case) when they read the group's clock, so that
	// Execute hands them its own readings (see instant).
	breakerClock, cmdBreakerClock metrics.Clock

	// deadlineClock is set when the group's clock is metrics.SystemClock,
	// whose readings turn into those of a call's deadline.Context
	// (deadlineOffset): the call's own readings then serve its deadline
	// (see timed and timedOutcome).
	deadlineClock bool

	mu       sync.Mutex                   // serialises command creation, Reconfigure and Close
	commands atomic.Pointer[commandTable] // copy on write: lookups take no lock
	closed   atomic.Bool                  // set (under mu) by Close, before the bulkhead closes

	hot groupCounters

	alerts alerter // nil: alerts off

	adaptive adaptiveLimit // GroupConfig.Adaptive's state (used only while it is on)

	warmEnd atomic.Int64 // group clock: end of the last WarmUp; new commands inherit the rest

	instances instances // first calls per instance, for InstanceWarmUp

	retries retryBudget // the retries made, for retry.Config's budget
}

// groupCounters are the counters every call of a group writes. They sit on
// cache lines of their own, so that their writes do not evict the read-only
// fields every call reads.
type groupCounters struct {
	_       [cacheline.Size]byte
	running atomic.Int64 // Thread: Run calls in progress, detached ones included
	_       [cacheline.Size - 8]byte
}

// commandTable maps names to commands, and command types to how they are
// named. Its fields are never modified once published; names, which
// successive tables share, only grows.
type commandTable struct {
	names    *nameIndex
	types    []typeEntry   // in order of first use
	overflow *commandState // set once the group has MaxCommands names
}

// byName yields every command of t with its name, in order of creation
// (range over t.byName).
func (t *commandTable) byName(yield func(string, *commandState) bool) {
	for _, c := range t.names.all() {
		if !yield(c.name, c) {
			return
		}
	}
}

// typeEntry says how commands of one type are named: by Namer, or by their
// type name (then c is that command). The entry of an interface type (a
// command passed to Execute as a Runner) is dynamic: its commands are
// named by their dynamic type's entry. A command of a nilable type (a
// pointer or an interface) may be nil, which Execute refuses.
type typeEntry struct {
	typ     reflect.Type
	namer   bool
	dynamic bool
	nilable bool
	c       *commandState
}

// typeEntry returns the entry of typ, or nil. A group sees few command
// types, so a scan (an interface comparison each) beats hashing.
func (t *commandTable) typeEntry(typ reflect.Type) *typeEntry {
	for i := range t.types {
		if t.types[i].typ == typ {
			return &t.types[i]
		}
	}
	return nil
}

// commandState is one command name of a group: its breaker and metrics.
type commandState struct {
	name     string
	sum      *[sha256.Size]byte // of the name the calls give, when name is its renamed form (see MaxNameLength); else nil
	group    *Group
	settings atomic.Pointer[commandSettings] // replaced by Reconfigure
	breaker  *circuit.Breaker
	metrics  *metrics.Rolling
	calls    sync.Pool  // free *poolCall[T, C] (Thread strategy), of the latest use's types
	flights  flights    // the coalesced calls in flight, by key (CommandConfig.Coalesce)
	hedged   hedgeDelay // the delay of its hedges, when a percentile (CommandConfig.Hedge)
	hot      commandCounters
}

// commandCounters are the counters every call of a command writes, on cache
// lines of their own (see groupCounters).
type commandCounters struct {
	_        [cacheline.Size]byte
	inFlight atomic.Int64 // calls from admission until Execute returns
	// detached counts the calls whose caller left at the deadline while
	// Run goes on (Thread): the caller adds one when the pool says
	// ErrDetached, the worker takes it back when Run has ended
	// (poolCall.orphan). The worker may come first: read it as max(n, 0),
	// which is then the truth.
	detached   atomic.Int64
	coalescing atomic.Int64 // calls waiting for another's Run (CommandConfig.Coalesce)
	_          [cacheline.Size - 24]byte
}

func newGroup(r *Registry, name string, cfg GroupConfig) (*Group, error) {
	if err := checkName("group name", name); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("group %q: %w", name, err)
	}
	cfg = cfg.withDefaults()
	g := &Group{name: name, reg: r, clock: r.clock, logger: r.logger, hook: r.hook,
		breakerClock: cfg.Breaker.Clock, cmdBreakerClock: cfg.CommandBreaker.Clock,
		deadlineClock: sameClock(r.clock, metrics.SystemClock())}
	g.live.Store(&liveConfig{GroupConfig: cfg, changed: r.clock.Now(), throttle: g.throttlerOf(&cfg)})
	var err error
	if g.breaker, err = circuit.New(g.breakerConfig(cfg.Breaker, name)); err != nil {
		return nil, err
	}
	if g.peak, err = windowed.NewPeak(cfg.Window); err != nil {
		return nil, err
	}
	if g.fallback, err = isolation.NewSemaphore(cfg.FallbackLimit); err != nil {
		return nil, err
	}
	if cfg.Strategy == Semaphore {
		g.rejected = metrics.SemaphoreRejected
		g.sem, err = isolation.NewSemaphore(cfg.MaxConcurrent)
	} else {
		g.rejected = metrics.ThreadPoolRejected
		var workers *isolation.Workers
		if workers, err = r.threadWorkers(); err != nil {
			return nil, err
		}
		g.pool, err = isolation.NewPool(isolation.PoolConfig{Size: cfg.MaxConcurrent, Queue: cfg.QueueSize, Logger: g.logger, Workers: workers})
	}
	if err != nil {
		return nil, err
	}
	g.adaptive.g = g
	if adaptiveOn(&cfg.Adaptive) {
		must(g.adaptive.configure(&cfg, r.clock.Now()))
	}
	g.commands.Store(&commandTable{names: newNameIndex()})
	g.alerts = cfg.Alerts
	return g, nil
}

// breakerConfig fills in what the group decides in a breaker config.
func (g *Group) breakerConfig(c circuit.Config, name string) circuit.Config {
	c.Name = name
	if c.Clock == nil {
		c.Clock = g.clock
	}
	if c.Logger == nil {
		c.Logger = g.logger
	}
	return c
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Config returns the group's effective configuration (defaults applied), as
// of the last Reconfigure.
func (g *Group) Config() GroupConfig { return g.cfg().GroupConfig }

// Breaker returns the group-level breaker, for instance to force it open or
// closed with SetMode.
func (g *Group) Breaker() *circuit.Breaker { return g.breaker }

// CommandBreaker returns the breaker of the named command (by the name its
// calls give, or the renamed form snapshots show, see MaxNameLength), and
// false if the group has no command of that name yet.
func (g *Group) CommandBreaker(name string) (*circuit.Breaker, bool) {
	t := g.commands.Load()
	c := t.names.get(name)
	if c == nil {
		c, _ = t.find(t.nameKey(name))
	}
	if c == nil {
		return nil, false
	}
	return c.breaker, true
}

// commandOf returns the command state for a call of cmd: by explicit name
// (WithName), by Namer, or by the command's type; nil if cmd is nil (a nil
// interface, or a nil pointer, to which Run could only answer with a nil
// dereference). Lookups read an immutable table and neither lock nor
// allocate (except that calling the Name method of a Namer converts the
// command to an interface: an allocation for a struct with fields); the
// first call of a new name or type takes the group's lock to add it.
func commandOf[T any, C Runner[T]](g *Group, cmd *C, name string) *commandState {
	t := g.commands.Load()
	if name != "" {
		if nilable(reflect.TypeFor[C]()) && isNil(any(*cmd)) {
			return nil
		}
	} else {
		static := reflect.TypeFor[C]()
		e := t.typeEntry(static)
		if (e == nil || e.nilable) && nilable(static) && isNil(any(*cmd)) {
			return nil // and its type is not recorded: nothing is counted
		}
		if e == nil {
			e = g.addType(static, any(*cmd), hookMismatches[T](static, any(*cmd)))
		}
		if e.dynamic {
			dyn := reflect.TypeOf(any(*cmd)) // an interface already: no allocation
			if e = t.typeEntry(dyn); e == nil {
				e = g.addType(dyn, any(*cmd), hookMismatches[T](dyn, any(*cmd)))
			}
		}
		if !e.namer {
			return e.c
		}
		name = any(*cmd).(Namer).Name()
	}
	if c := t.names.get(name); c != nil && c.sum == nil {
		return c // the name as given: a renamed command's key is its renamed form, never a name given
	}
	if c := t.known(name); c != nil {
		return c
	}
	return g.addCommand(name)
}

// nilable reports whether a command of type typ may be nil: a pointer or an
// interface.
func nilable(typ reflect.Type) bool {
	k := typ.Kind()
	return k == reflect.Pointer || k == reflect.Interface
}

// addType records how commands of type typ, such as cmd, are named. The
// first to record typ logs its hook mismatches (see hookMismatches).
func (g *Group) addType(typ reflect.Type, cmd any, mismatches []string) *typeEntry {
	entry := typeEntry{typ: typ, dynamic: typ.Kind() == reflect.Interface, nilable: nilable(typ)}
	if !entry.dynamic {
		_, entry.namer = cmd.(Namer)
		if !entry.namer {
			entry.c = g.addCommand(wrap.TypeName(typ))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.commands.Load()
	if e := old.typeEntry(typ); e != nil {
		return e
	}
	for _, m := range mismatches {
		g.logger.Warn("bulwark: command method ignored: "+m, slog.String("group", g.name), slog.String("type", typ.String()))
	}
	next := &commandTable{names: old.names, types: append(slices.Clip(old.types), entry), overflow: old.overflow}
	g.commands.Store(next)
	return &next.types[len(next.types)-1]
}

// hookMismatches lists the methods of typ (the type of cmd) named Fallback
// or Discard that Execute will not call, because cmd does not implement
// Fallbacker[T] or Discarder[T] with them: a pointer receiver on a command
// passed by value, a wrong parameter or result type. Such a mistake would
// otherwise show only as FALLBACK_MISSING (or a leak) in production; the
// compile-time guard is var _ command.Fallbacker[T] = myCommand{}.
func hookMismatches[T any](typ reflect.Type, cmd any) []string {
	if typ.Kind() == reflect.Interface {
		return nil
	}
	var out []string
	check := func(method string, implemented bool, want string) {
		if implemented {
			return
		}
		_, onValue := typ.MethodByName(method)
		_, onPointer := reflect.PointerTo(typ).MethodByName(method)
		switch {
		case onValue:
			out = append(out, fmt.Sprintf("%v.%s does not have the signature %s", typ, method, want))
		case onPointer:
			out = append(out, fmt.Sprintf("%s has a pointer receiver, but the command is passed as %v: pass &cmd, or give %s a value receiver (%s)",
				method, typ, method, want))
		}
	}
	_, fb := cmd.(Fallbacker[T])
	check("Fallback", fb, fmt.Sprintf("Fallback(context.Context, error) (%v, error)", reflect.TypeFor[T]()))
	_, d := cmd.(Discarder[T])
	check("Discard", d, fmt.Sprintf("Discard(%v)", reflect.TypeFor[T]()))
	return out
}

// addCommand returns the command of that name, creating it if needed, or
// the overflow command once the group has MaxCommands names.
func (g *Group) addCommand(name string) *commandState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addCommandLocked(name)
}

// addCommandLocked is addCommand with g.mu held. A name that is not valid
// UTF-8 or longer than MaxNameLength gets a command under its renamed form
// (see MaxNameLength); a name whose key is another name's runs as the
// overflow command.
func (g *Group) addCommandLocked(name string) *commandState {
	old := g.commands.Load()
	key, sum := old.nameKey(name)
	c, taken := old.find(key, sum)
	if c != nil {
		return c
	}
	if old.overflow != nil {
		return old.overflow
	}
	switch {
	case taken:
		g.logger.Warn("bulwark: command name renamed like another name; it runs as "+overflowCommand,
			slog.String("group", g.name), slog.String("name", quoteName(name)), slog.String("renamed", key))
		return g.overflowLocked(old.names)
	case old.names.len() < g.cfg().MaxCommands:
		if sum != nil {
			g.logger.Warn("bulwark: command name is not valid UTF-8 or longer than MaxNameLength; renamed",
				slog.String("group", g.name), slog.String("name", quoteName(name)), slog.String("renamed", key))
		}
		c = g.newCommand(key)
		c.sum = sum
		old.names.add(c)
		return c
	}
	g.logger.Warn("bulwark: group has MaxCommands command names; new names run as "+overflowCommand,
		slog.String("group", g.name), slog.Int("max_commands", g.cfg().MaxCommands), slog.String("name", quoteName(name)))
	c = g.overflowLocked(old.names)
	g.commands.Store(&commandTable{names: old.names, types: old.types, overflow: c})
	return c
}

// overflowLocked returns the overflow command of names, adding it if
// needed. g.mu is held.
func (g *Group) overflowLocked(names *nameIndex) *commandState {
	c := names.get(overflowCommand)
	if c == nil {
		c = g.newCommand(overflowCommand)
		names.add(c)
	}
	return c
}

// newCommand creates a command's breaker and metrics, and exports them. The
// configs were validated by NewGroup (or Reconfigure), so creation cannot
// fail; a failed export (a name clash) only costs the export and is logged. g.mu
// is held.
func (g *Group) newCommand(name string) *commandState {
	cfg := g.cfg()
	c := &commandState{name: name, group: g}
	c.settings.Store(cfg.settingsOf(g, name))
	var err error
	if c.breaker, err = circuit.New(g.commandBreakerConfig(&cfg.GroupConfig, name)); err != nil {
		panic(fmt.Sprintf("command: breaker of validated config refused: %v", err))
	}
	g.inheritWarmUp(c.breaker)
	if c.metrics, err = metrics.NewRolling(cfg.Window, metrics.CountsAndLatencies); err != nil {
		panic(fmt.Sprintf("command: window of validated config refused: %v", err))
	}
	if e := g.reg.export; e != nil && !g.closed.Load() {
		if err := e.ExportCommand(g, name); err != nil {
			g.logger.Warn("bulwark: command metrics not exported", slog.String("group", g.name),
				slog.String("command", name), slog.Any("error", err))
		}
	}
	return c
}

// Close stops the group: it closes the bulkhead (waiting, until ctx ends,
// for calls in progress), removes the group from its registry and its
// metrics from the registry's exporter. Calls made after Close are
// rejected (THREAD_POOL_REJECTED or SEMAPHORE_REJECTED) with an error
// matching ErrClosed and isolation.ErrClosed, not ErrRefused.
func (g *Group) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed.Load() {
		g.mu.Unlock()
		return nil
	}
	g.closed.Store(true)
	g.mu.Unlock()

	g.reg.remove(g)
	if g.alerts != nil {
		g.alerts.Unwatch(g)
	}
	return g.closeBulkhead(ctx)
}

// closeBulkhead closes the pool or semaphore; see Group.Close.
func (g *Group) closeBulkhead(ctx context.Context) error {
	var err error
	if g.pool != nil {
		err = g.pool.Close(ctx)
	} else {
		err = g.sem.Close(ctx)
	}
	if errors.Is(err, isolation.ErrClosed) {
		return nil
	}
	return err
}

// quiet reports whether nothing is going on in g: no call in flight or
// detached, no event in any command's window, and every breaker (the
// group's and each command's) closed. It reads a few words per command, a
// small part of what Snapshot reads: the alerter gets it from Watch and
// skips the evaluation of a quiet group, whose snapshot could raise no
// alert.
func (g *Group) quiet() bool {
	if g.breaker.State() != circuit.Closed {
		return false
	}
	now := g.clock.Now()
	for _, c := range g.commands.Load().names.all() {
		if c.hot.inFlight.Load() != 0 || c.hot.detached.Load() > 0 || c.hot.coalescing.Load() != 0 ||
			c.breaker.State() != circuit.Closed || c.metrics.Counts(now) != (metrics.Counts{}) {
			return false
		}
	}
	return true
}

// Snapshot describes the group and its commands now.
func (g *Group) Snapshot() GroupSnapshot {
	now := g.clock.Now()
	cfg := g.cfg()
	s := GroupSnapshot{
		Name:     g.name,
		Config:   cfg.GroupConfig,
		Breaker:  g.breaker.Snapshot(),
		Metrics:  g.peakSnapshot(now),
		Throttle: cfg.throttleSnapshot(now),
		Adaptive: g.adaptiveSnapshot(cfg),

		ConfigGeneration: cfg.generation,
		ConfigAge:        now - cfg.changed,
	}
	if g.alerts != nil {
		s.AlertTier, _ = g.alerts.Status(g, "")
	}
	if g.pool != nil {
		s.Bulkhead = g.pool.Stats()
	} else {
		s.Bulkhead = g.sem.Stats()
	}
	cmds := g.commands.Load().names.byNameOrder()
	// Each command's snapshot is built in place: at 10,000 commands the
	// slice is 12 MB, and a copy through the stack doubled its stores.
	s.Commands = make([]CommandSnapshot, len(cmds))
	for i, c := range cmds {
		if c.sum != nil {
			s.RenamedCommands++
		}
		cs := &s.Commands[i]
		c.snapshotInto(cs, now)
		addCounts(&s.Metrics.Counts, cs.Metrics.Counts)
		addCounts(&s.Metrics.Cumulative, cs.Metrics.Cumulative)
	}
	return s
}

// window returns the group's window at now without latencies: its
// commands' counts summed, and the peak of calls running at once. The
// executor records each event once, in the command's window; the group's
// counts are derived here.
func (g *Group) window(now time.Duration) metrics.Snapshot {
	s := g.peakSnapshot(now)
	for _, c := range g.commands.Load().names.all() {
		addCounts(&s.Counts, c.metrics.Counts(now))
		addCounts(&s.Cumulative, c.metrics.Cumulative())
	}
	return s
}

// peakSnapshot returns the group's window at now before its commands'
// counts are added: the peak of calls running at once.
func (g *Group) peakSnapshot(now time.Duration) metrics.Snapshot {
	return metrics.Snapshot{Window: g.peak.Window(), Max: g.peak.Max(now)}
}

func addCounts(sum *metrics.Counts, c metrics.Counts) {
	for e := range sum {
		sum[e] += c[e]
	}
}

// snapshotInto fills s, a zero CommandSnapshot, with the command's snapshot
// at now.
func (c *commandState) snapshotInto(s *CommandSnapshot, now time.Duration) {
	s.Name = c.name
	s.InFlight = c.hot.inFlight.Load()
	s.Detached = max(c.hot.detached.Load(), 0) // a brief -1: see commandCounters
	s.Coalescing = c.hot.coalescing.Load()
	s.Timeout = c.settings.Load().timeout
	s.Breaker = c.breaker.Snapshot()
	s.Metrics = c.metrics.Snapshot(now)
	s.live = c.metrics
	if a := c.group.alerts; a != nil {
		s.AlertTier, s.DegradedAlarm = a.Status(c.group, c.name)
	}
}

// invalid returns a configuration error wrapping ErrInvalidConfig.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
