package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/bulwark-go/bulwark/command"
)

// ErrInvalidConfig is wrapped by every configuration error of this package.
var ErrInvalidConfig = errors.New("dashboard: invalid config")

// Defaults of Config.
const (
	DefaultInterval     = 500 * time.Millisecond // Hystrix's default delay
	DefaultMinInterval  = 100 * time.Millisecond // fastest ?delay= honoured
	DefaultMaxInterval  = 30 * time.Second       // slowest ?delay= honoured
	DefaultMaxClients   = 5                      // Hystrix's default connection cap
	DefaultWriteTimeout = 5 * time.Second        // a frame that takes longer drops the client
)

// Source supplies the snapshots the stream publishes. *command.Registry is
// one. Snapshot must be safe for concurrent use; the stream calls it once per
// tick of each distinct delay, never once per client. A panic in Snapshot
// is recovered and logged; that tick's frame is a ping only.
type Source interface {
	Snapshot() command.Snapshot
}

// Config configures a Stream (and the stream of New). The zero value of a
// field means its documented default; negative values are an error.
type Config struct {
	// Interval is the time between two frames for a client that gives no
	// ?delay= parameter. Default DefaultInterval (500 ms).
	Interval time.Duration
	// MinInterval and MaxInterval bound the ?delay= a client may ask for;
	// a delay outside is clamped to the nearest bound. Interval must lie
	// between them: an Interval below MinInterval is an error, so a faster
	// stream needs a MinInterval set as low. Defaults DefaultMinInterval
	// (100 ms) and DefaultMaxInterval (30 s, or Interval if it is longer).
	MinInterval, MaxInterval time.Duration
	// MaxClients caps the stream connections served at once; one more is
	// answered 503 Service Unavailable. Default DefaultMaxClients (5).
	MaxClients int
	// WriteTimeout bounds the time one frame may take to reach a client's
	// connection. A client whose connection does not take a frame within
	// it is disconnected and its slot freed at once: about WriteTimeout
	// after that frame was due, whatever the delay. The connection takes
	// what the operating system can buffer for it: a client that stops
	// reading is seen only once its socket buffers are full (tens of
	// kilobytes to a few megabytes, depending on the system and the
	// network), which for small frames at a long delay can take minutes.
	// A server dedicated to the dashboard can shorten that by giving its
	// accepted connections small send buffers (net.TCPConn.SetWriteBuffer).
	// Default DefaultWriteTimeout (5 s).
	WriteTimeout time.Duration
	// Logger receives connection and error records; nil means slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field replaced by its default: the
// effective configuration. Invalid values are left for Validate to report.
func (c Config) WithDefaults() Config {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = max(DefaultMaxInterval, c.Interval)
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field of the effective configuration,
// wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	e := c.WithDefaults()
	switch {
	case e.Interval < 0:
		return fmt.Errorf("%w: Interval %v is negative", ErrInvalidConfig, c.Interval)
	case e.MinInterval < 0:
		return fmt.Errorf("%w: MinInterval %v is negative", ErrInvalidConfig, c.MinInterval)
	case e.MaxInterval < 0:
		return fmt.Errorf("%w: MaxInterval %v is negative", ErrInvalidConfig, c.MaxInterval)
	case e.MinInterval > e.MaxInterval:
		return fmt.Errorf("%w: MinInterval %v is above MaxInterval %v", ErrInvalidConfig, e.MinInterval, e.MaxInterval)
	case e.Interval < e.MinInterval:
		return fmt.Errorf("%w: Interval %v is below MinInterval %v", ErrInvalidConfig, e.Interval, e.MinInterval)
	case e.Interval > e.MaxInterval:
		return fmt.Errorf("%w: Interval %v is above MaxInterval %v", ErrInvalidConfig, e.Interval, e.MaxInterval)
	case e.MaxClients < 0:
		return fmt.Errorf("%w: MaxClients %d is negative", ErrInvalidConfig, c.MaxClients)
	case e.WriteTimeout < 0:
		return fmt.Errorf("%w: WriteTimeout %v is negative", ErrInvalidConfig, c.WriteTimeout)
	}
	return nil
}

// Stream is the http.Handler of the hystrix.stream: Server-Sent Events
// carrying one HystrixCommand event per command, one HystrixThreadPool event
// per pool group, bulwark's own BulwarkCommand and BulwarkGroup events, and a
// ping, every interval. Clients that ask for the same delay share one hub
// goroutine, which builds and encodes each frame once. It is safe for
// concurrent use.
type Stream struct {
	src Source
	cfg Config // effective
	log *slog.Logger

	mu      sync.Mutex
	hubs    map[time.Duration]*hub // one per distinct delay with clients
	clients int                    // connections served now, across hubs
}

// NewStream returns the stream handler publishing src's snapshots. It fails,
// wrapping ErrInvalidConfig, if src is nil (a nil interface, or one holding
// a nil pointer such as a nil *command.Registry) or cfg is invalid.
func NewStream(src Source, cfg Config) (*Stream, error) {
	if err := checkSource(src); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Stream{src: src, cfg: cfg, log: cfg.Logger, hubs: make(map[time.Duration]*hub)}, nil
}

// checkSource refuses a nil Source: a nil interface, or one holding a nil
// pointer, func, channel, map or slice (such as a nil *command.Registry),
// whose Snapshot would fail at the first stream client.
func checkSource(src Source) error {
	if src == nil {
		return fmt.Errorf("%w: nil Source", ErrInvalidConfig)
	}
	switch v := reflect.ValueOf(src); v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Chan, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return fmt.Errorf("%w: nil Source (a nil %T)", ErrInvalidConfig, src)
		}
	}
	return nil
}

// Config returns the effective configuration.
func (s *Stream) Config() Config { return s.cfg }

// Clients returns the number of stream connections served now.
func (s *Stream) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients
}

// ServeHTTP streams frames until the client goes away, its request context
// ends, or a frame cannot be written within WriteTimeout. It answers 405 to
// anything but GET, 400 to a ?delay= that is not a positive integer number of
// milliseconds, and 503 past MaxClients.
func (s *Stream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "dashboard: the stream answers GET only", http.StatusMethodNotAllowed)
		return
	}
	delay, err := s.delay(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := newClient()
	h, ok := s.join(delay, c)
	if !ok {
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("dashboard: stream connection limit reached (%d)", s.cfg.MaxClients),
			http.StatusServiceUnavailable)
		return
	}
	defer s.leave(h, c)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream;charset=UTF-8")
	hdr.Set("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate")
	hdr.Set("Pragma", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)

	rc := http.NewResponseController(w)
	if err := s.write(w, rc, nil); err != nil {
		s.log.Debug("dashboard: stream client gone", "remote", r.RemoteAddr, "err", err)
		return
	}
	s.log.Debug("dashboard: stream client connected", "remote", r.RemoteAddr, "delay", delay)
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			s.log.Debug("dashboard: stream client left", "remote", r.RemoteAddr)
			return
		case <-c.wake:
		}
		f := c.next.Swap(nil)
		if f == nil {
			continue
		}
		if err := s.write(w, rc, f.data); err != nil {
			s.log.Info("dashboard: stream client dropped", "remote", r.RemoteAddr, "err", err)
			return
		}
	}
}

// write sends data (possibly none) and flushes it, within WriteTimeout.
// A ResponseWriter without write deadlines is still served, unbounded.
func (s *Stream) write(w http.ResponseWriter, rc *http.ResponseController, data []byte) error {
	err := rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if len(data) > 0 {
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return rc.Flush()
}

// delay reads the ?delay= parameter: absent means Interval; a positive
// whole number of milliseconds is clamped to [MinInterval, MaxInterval],
// however many digits it has; anything else (zero and negative numbers
// included) is an error.
func (s *Stream) delay(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("delay")
	if v == "" {
		return s.cfg.Interval, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) && ms > 0 {
		return s.cfg.MaxInterval, nil // past int64 milliseconds
	}
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("dashboard: delay must be a positive whole number of milliseconds, got %q", v)
	}
	if ms > s.cfg.MaxInterval.Milliseconds() {
		return s.cfg.MaxInterval, nil
	}
	return max(time.Duration(ms)*time.Millisecond, s.cfg.MinInterval), nil
}

// join registers c with the hub of delay, starting that hub if it is the
// first client, unless MaxClients are served already.
func (s *Stream) join(delay time.Duration, c *client) (*hub, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients >= s.cfg.MaxClients {
		return nil, false
	}
	s.clients++
	h := s.hubs[delay]
	if h == nil {
		h = newHub(s, delay)
		s.hubs[delay] = h
		go h.run()
	}
	h.add(c)
	return h, true
}

// leave unregisters c; the last client of a hub stops it and waits for its
// goroutine to end, so no goroutine outlives the last handler.
func (s *Stream) leave(h *hub, c *client) {
	s.mu.Lock()
	s.clients--
	last := h.remove(c)
	if last {
		delete(s.hubs, h.delay)
		close(h.stop)
	}
	s.mu.Unlock()
	if last {
		<-h.done
	}
}
