package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of AggregateConfig.
const (
	DefaultDiscoverInterval = 30 * time.Second
	DefaultReconnectMin     = 500 * time.Millisecond
	DefaultReconnectMax     = 15 * time.Second
	DefaultStaleAfter       = 5 * time.Second
	DefaultMaxEventBytes    = 1 << 20
	DefaultMaxEvents        = 10000
)

// AggregateConfig configures an Aggregate. The zero value of a field means
// its documented default; negative values are an error.
type AggregateConfig struct {
	// Instances are the stream URLs of the instances to merge, such as
	// "http://10.0.0.7:7979/hystrix.stream" (add ?delay= to ask an
	// instance for another interval).
	Instances []string
	// Discover, when set, returns the instances' stream URLs; it is called
	// at once and then every DiscoverInterval, and the aggregate follows
	// the union of Instances and its answer: it connects to new URLs and
	// lets go of URLs that left. A call that fails (or panics) keeps the
	// previous answer; the failure is logged. Each call gets a context
	// that ends after DiscoverInterval or at Close.
	Discover func(ctx context.Context) ([]string, error)
	// DiscoverInterval is the time between two Discover calls. Default
	// DefaultDiscoverInterval (30 s).
	DiscoverInterval time.Duration
	// ReconnectMin and ReconnectMax bound the wait before reconnecting to
	// an instance whose stream failed: ReconnectMin after a connection
	// that worked, doubled after each failed attempt up to ReconnectMax.
	// Defaults DefaultReconnectMin (500 ms) and DefaultReconnectMax (15 s).
	ReconnectMin, ReconnectMax time.Duration
	// StaleAfter is how long an instance's event counts in the totals
	// without a newer one for its key (a command that went away), and how
	// long an instance's stream may stay silent before the aggregate
	// closes it and reconnects. An instance whose connection fails leaves
	// the totals at once. Default DefaultStaleAfter (5 s): bulwark streams
	// send a frame every 500 ms.
	StaleAfter time.Duration
	// MaxEventBytes bounds one event line; a longer one ends the
	// connection. MaxEvents bounds the keys (commands and pools) kept per
	// instance; new keys past it are ignored. Together they bound the
	// memory one instance can take, whatever it sends: of each event the
	// aggregate decodes and keeps only the fields it merges (the keys of
	// the stream's four event types; other fields and event types are
	// dropped), with every name at most command.MaxNameLength bytes (an
	// event with a longer one is skipped), every other text cut to 128
	// bytes and the newest 8 breaker transitions, so that a key costs at
	// most 8 KiB (0.2 to 1.5 KiB as bulwark instances send them). An
	// instance takes at most MaxEventBytes (its read buffer) plus
	// 2 × MaxEvents × 8 KiB (the frame kept and the frame being read):
	// 157 MiB at the defaults in the worst case, about a fifth of it for
	// a bulwark instance with MaxEvents keys; lower MaxEvents for a fleet
	// of many small instances. Defaults DefaultMaxEventBytes (1 MiB) and
	// DefaultMaxEvents (10000).
	MaxEventBytes, MaxEvents int
	// Client makes the requests to the instances; it must not set a
	// Timeout (a stream does not end). Default: a client of its own,
	// without keep-alive, closed by Close.
	Client *http.Client
	// Stream configures the merged stream the aggregate serves (interval,
	// client cap, history, logger), as for NewStream. The aggregate has no
	// control endpoint: a Stream.Control is an error.
	Stream Config
}

// WithDefaults returns c with every zero field replaced by its default.
func (c AggregateConfig) WithDefaults() AggregateConfig {
	if c.DiscoverInterval == 0 {
		c.DiscoverInterval = DefaultDiscoverInterval
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = DefaultReconnectMin
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = max(DefaultReconnectMax, c.ReconnectMin)
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	c.Stream = c.Stream.WithDefaults()
	return c
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c AggregateConfig) Validate() error {
	e := c.WithDefaults()
	switch {
	case len(c.Instances) == 0 && c.Discover == nil:
		return fmt.Errorf("%w: no Instances and no Discover", ErrInvalidConfig)
	case e.DiscoverInterval < 0:
		return fmt.Errorf("%w: DiscoverInterval %v is negative", ErrInvalidConfig, c.DiscoverInterval)
	case e.ReconnectMin < 0:
		return fmt.Errorf("%w: ReconnectMin %v is negative", ErrInvalidConfig, c.ReconnectMin)
	case e.ReconnectMax < e.ReconnectMin:
		return fmt.Errorf("%w: ReconnectMax %v is below ReconnectMin %v", ErrInvalidConfig, e.ReconnectMax, e.ReconnectMin)
	case e.StaleAfter < 0:
		return fmt.Errorf("%w: StaleAfter %v is negative", ErrInvalidConfig, c.StaleAfter)
	case e.MaxEventBytes < 0:
		return fmt.Errorf("%w: MaxEventBytes %d is negative", ErrInvalidConfig, c.MaxEventBytes)
	case e.MaxEvents < 0:
		return fmt.Errorf("%w: MaxEvents %d is negative", ErrInvalidConfig, c.MaxEvents)
	case c.Client != nil && c.Client.Timeout != 0:
		return fmt.Errorf("%w: Client.Timeout %v would cut the streams off", ErrInvalidConfig, c.Client.Timeout)
	case c.Stream.Control != nil:
		return fmt.Errorf("%w: Stream.Control is set, but the aggregate has no control endpoint: control each instance's own", ErrInvalidConfig)
	}
	for _, u := range c.Instances {
		if err := checkInstanceURL(u); err != nil {
			return err
		}
	}
	return c.Stream.Validate()
}

func checkInstanceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: instance URL %q: %v", ErrInvalidConfig, s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: instance URL %q is not an http(s) URL", ErrInvalidConfig, s)
	}
	return nil
}

// Aggregate merges the hystrix.streams of several instances into one, the
// way Netflix's Turbine does, and serves it with the dashboard page: the
// merged stream at any path ending in StreamPath, the page elsewhere (as
// the handler of New). The unmodified Hystrix Dashboard shows the fleet
// ("Hosts: N") from it, and so does bulwark's page.
//
// Each instance is read by a goroutine of its own, from NewAggregate to
// Close, which keeps the newest event per command and pool of that
// instance. Every interval, the served stream merges the events of the
// instances connected at that moment, per command and per pool (see the
// merge rules below), so the totals are the sum of the instances' own
// figures as of their latest frame. An instance whose stream fails leaves
// the totals at once and is retried with backoff (ReconnectMin doubling up
// to ReconnectMax). Each key's reportingHosts tells how many instances
// reported it.
//
// Merge rules, as Turbine: counts and gauges are summed; rolling peaks and
// configuration values take the maximum; booleans such as
// isCircuitBreakerOpen are true if any instance's is (the worst state
// wins); the keys the Hystrix Dashboard divides by reportingHosts
// (errorPercentage, latency means and percentiles, the window) carry the
// fleet value times reportingHosts. errorPercentage is the fleet's
// errorCount over its requestCount; latencies are the instances' values
// averaged weighted by their requestCount, except the maximum ("100"),
// which is the largest. bulwark's own BulwarkCommand and BulwarkGroup
// events are merged too: breaker fields from the instance in the worst
// state, counts summed, ratios weighted by healthRequests. Other event
// types, and the fields the merge does not use, are dropped: the merged
// frame carries the keys bulwark's own stream does, and nothing else.
//
// It is safe for concurrent use.
type Aggregate struct {
	cfg    AggregateConfig // effective
	log    *slog.Logger
	client *http.Client
	own    *http.Transport // the default client's transport; nil with Config.Client
	h      *Handler        // the merged stream and the page, routed as by New

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the discovery and history goroutines

	mu        sync.Mutex
	upstreams map[string]*upstream
	closed    bool
}

// NewAggregate starts reading cfg.Instances (and what cfg.Discover returns)
// and returns the handler serving their merged stream and the page. Close
// stops it. It fails, wrapping ErrInvalidConfig, if cfg is invalid.
func NewAggregate(cfg AggregateConfig) (*Aggregate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	a := &Aggregate{cfg: cfg, log: cfg.Stream.Logger, client: cfg.Client, upstreams: make(map[string]*upstream)}
	if a.client == nil {
		a.own = &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}
		a.client = &http.Client{Transport: a.own}
	}
	stream, err := newStream(cfg.Stream, a.frame)
	if err != nil {
		return nil, err
	}
	if a.h, err = newHandler(stream, nil); err != nil {
		return nil, err
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.follow(cfg.Instances)
	a.wg.Go(func() { _ = stream.KeepHistory(a.ctx) })
	if cfg.Discover != nil {
		a.wg.Go(a.discover)
	}
	return a, nil
}

// Stream returns the merged stream's handler, for its Clients count.
func (a *Aggregate) Stream() *Stream { return a.h.Stream() }

// ServeHTTP routes a request as the handler of New does, without a control
// endpoint: the merged stream at paths ending in StreamPath, the page
// elsewhere.
func (a *Aggregate) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.h.ServeHTTP(w, r) }

// Hosts returns the number of instances connected now.
func (a *Aggregate) Hosts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, u := range a.upstreams {
		u.mu.Lock()
		if u.connected {
			n++
		}
		u.mu.Unlock()
	}
	return n
}

// Instances returns the stream URLs the aggregate follows now, sorted.
func (a *Aggregate) Instances() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.upstreams))
}

// follow makes the aggregate read exactly the union of Instances and urls.
func (a *Aggregate) follow(urls []string) {
	want := make(map[string]bool, len(a.cfg.Instances)+len(urls))
	for _, u := range a.cfg.Instances {
		want[u] = true
	}
	for _, u := range urls {
		if err := checkInstanceURL(u); err != nil {
			a.log.Warn("dashboard: aggregate ignores a discovered instance", "err", err)
			continue
		}
		want[u] = true
	}
	var gone []*upstream
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	for u, up := range a.upstreams {
		if !want[u] {
			up.cancel()
			delete(a.upstreams, u)
			gone = append(gone, up)
		}
	}
	for u := range want {
		if _, ok := a.upstreams[u]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(a.ctx)
		up := &upstream{url: u, a: a, cancel: cancel, done: make(chan struct{}), events: make(map[string]stored)}
		a.upstreams[u] = up
		go up.run(ctx)
	}
	a.mu.Unlock()
	for _, up := range gone {
		<-up.done
	}
}

// discover calls Discover every DiscoverInterval until Close.
func (a *Aggregate) discover() {
	t := time.NewTicker(a.cfg.DiscoverInterval)
	defer t.Stop()
	failing := false
	for {
		urls, err := a.callDiscover()
		switch {
		case err != nil && a.ctx.Err() == nil:
			if !failing {
				a.log.Warn("dashboard: aggregate discovery failed; keeping the instances it had", "err", err)
			}
			failing = true
		case err == nil:
			if failing {
				a.log.Info("dashboard: aggregate discovery works again")
			}
			failing = false
			a.follow(urls)
		}
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// callDiscover calls Discover with a deadline, turning a panic into an error.
func (a *Aggregate) callDiscover() (urls []string, err error) {
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.DiscoverInterval)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("dashboard: Discover panicked: %v", v)
		}
	}()
	return a.cfg.Discover(ctx)
}

// typeOrder is the order of the merged frame: Hystrix's commands, then its
// pools, then bulwark's own events.
var typeOrder = []string{TypeHystrixCommand, TypeHystrixThreadPool, TypeBulwarkCommand, TypeBulwarkGroup}

// frame merges the connected instances' fresh events into one frame, and
// records each command's rates in e's history.
func (a *Aggregate) frame(e *encoder, sizeHint int) ([]byte, error) {
	now := time.Now()
	byKey := make(map[string][]upEvent)
	a.mu.Lock()
	ups := make([]*upstream, 0, len(a.upstreams))
	for _, u := range a.upstreams {
		ups = append(ups, u)
	}
	a.mu.Unlock()
	slices.SortFunc(ups, func(x, y *upstream) int { return strings.Compare(x.url, y.url) })
	for _, u := range ups {
		u.fresh(now, byKey)
	}
	keys := slices.Sorted(maps.Keys(byKey))

	var buf bytes.Buffer
	buf.Grow(sizeHint + sizeHint/8 + len(ping))
	enc := json.NewEncoder(&buf)
	for _, typ := range typeOrder {
		prefix := typ + "\x00"
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			var merged any
			switch typ {
			case TypeHystrixCommand:
				hc := mergeHystrix(eventsOf[*hystrixCommand](byKey[k]))
				if e.hist != nil {
					recordMerged(e.hist, now, *hc)
				}
				merged = hc
			case TypeHystrixThreadPool:
				merged = mergeHystrix(eventsOf[*hystrixThreadPool](byKey[k]))
			case TypeBulwarkCommand:
				merged = mergeNativeCommands(eventsOf[*nativeCommand](byKey[k]))
			case TypeBulwarkGroup:
				merged = mergeNativeGroups(eventsOf[*nativeGroup](byKey[k]))
			}
			buf.Write(dataPrefix)
			if err := enc.Encode(merged); err != nil {
				return nil, err
			}
			buf.WriteByte('\n')
		}
	}
	buf.Write(ping)
	return buf.Bytes(), nil
}

// eventsOf returns evs, the events of one key (so all of one type), as
// that type.
func eventsOf[E upEvent](evs []upEvent) []E {
	out := make([]E, len(evs))
	for i, ev := range evs {
		out[i] = ev.(E)
	}
	return out
}

// recordMerged adds the rates of a merged HystrixCommand event to h. The
// event carries the window times its reportingHosts (for the Hystrix
// Dashboard to divide); the rates are over one instance's window.
func recordMerged(h *history, now time.Time, merged hystrixCommand) {
	merged.MetricsRollingStatisticalWindowInMillis = int64(float64(merged.MetricsRollingStatisticalWindowInMillis) / hostsOf(merged.ReportingHosts))
	rate, errs := rates(&merged)
	h.add(now.UnixMilli(), merged.Group, merged.Name, rate, errs)
}

// Close stops reading the instances, ends the merged stream's clients (see
// Stream.Close) and waits for every goroutine of the aggregate, or until
// ctx ends (it returns an error wrapping ctx.Err() then). Closing twice is
// safe.
func (a *Aggregate) Close(ctx context.Context) error {
	a.mu.Lock()
	a.closed = true
	ups := make([]*upstream, 0, len(a.upstreams))
	for _, u := range a.upstreams {
		ups = append(ups, u)
	}
	a.mu.Unlock()
	a.cancel()
	err := a.h.Close(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, u := range ups {
			<-u.done
		}
		a.wg.Wait()
		if a.own != nil {
			a.own.CloseIdleConnections()
		}
	}()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("dashboard: aggregate still stopping: %w", ctx.Err()))
	}
}
