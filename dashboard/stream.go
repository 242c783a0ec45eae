package dashboard

import (
	"context"
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
	DefaultWriteBuffer  = 16 << 10               // bytes: send buffer of a connection taken over
	DefaultHistory      = 2 * time.Minute        // span of the history sent to a new client
	DefaultHistoryStep  = time.Second            // one history point per command per step
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
	// it is disconnected and its slot freed at once. A connection takes
	// what the operating system can still buffer for it, so a client that
	// stops reading is seen once those buffers are full: about
	// WriteTimeout after that, whatever the delay.
	//
	// On an HTTP/1.x connection the stream takes over (see WriteBuffer),
	// the buffers are WriteBuffer on our side plus the client's receive
	// buffer, which stays small (tens of kilobytes) for a client that
	// never reads but may have grown to megabytes for one that read fast
	// before it stopped: a client that never reads loses its slot within
	// about WriteTimeout plus a few intervals. Through a ResponseWriter
	// that cannot be taken over (HTTP/2, or a middleware wrapper without
	// Hijack) the system sizes the send buffer itself and may grow it to
	// megabytes for a client that stops reading: at small frames and long
	// delays that hides a stall for minutes. There, serve the stream over
	// HTTP/1.1 (a server or listener of its own, or a wrapper that passes
	// Hijack through via Unwrap), or give the server's accepted
	// connections small send buffers (net.TCPConn.SetWriteBuffer in a
	// net.Listener wrapper). Default DefaultWriteTimeout (5 s).
	WriteTimeout time.Duration
	// WriteBuffer is the kernel send buffer, in bytes, the stream sets on
	// each HTTP/1.x connection it takes over (net.TCPConn.SetWriteBuffer;
	// the system may round it, Linux doubles it). Small, it makes a stall
	// show fast; it also bounds how fast a frame reaches a distant client
	// (about WriteBuffer per round trip), so raise it if frames are large
	// and clients far away. Default DefaultWriteBuffer (16 KiB).
	WriteBuffer int
	// Logger receives connection and error records; nil means slog.Default().
	Logger *slog.Logger
	// History is how far back the stream remembers each command's request
	// and error rates, and HistoryStep how often it records them: a new
	// client first gets one BulwarkHistory event per command (at most
	// History/HistoryStep points each), so the page's sparklines are full
	// at once and survive a reload. Points are recorded from the frames the
	// stream builds, so they cover the time when at least one client
	// watched, unless Stream.KeepHistory records them meanwhile. Memory is
	// bounded: History/HistoryStep points per command. Defaults
	// DefaultHistory (2 min) and DefaultHistoryStep (1 s); HistoryStep may
	// not exceed History.
	History, HistoryStep time.Duration
	// Extra, if set, is called once per frame and each value it returns is
	// sent as one more event, JSON-encoded, after bulwark's own: the way
	// an extension adds its native events, such as the write queue's
	// BulwarkQueue (durable.Replayer.StreamEvent). It runs on the stream's
	// goroutine: it must be quick, returning values already computed.
	Extra func() []any
	// Control, if set, is the control endpoint (package dashboard/control)
	// that New's handler serves at ControlPath, its page then offering the
	// controls to whoever enters the token; off by default. The stream
	// itself serves none: NewStream and NewAggregate refuse a Control
	// rather than ignore it.
	Control http.Handler
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
	if c.WriteBuffer == 0 {
		c.WriteBuffer = DefaultWriteBuffer
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.History == 0 {
		c.History = DefaultHistory
	}
	if c.HistoryStep == 0 {
		c.HistoryStep = DefaultHistoryStep
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
	case e.WriteBuffer < 0:
		return fmt.Errorf("%w: WriteBuffer %d is negative", ErrInvalidConfig, c.WriteBuffer)
	case e.History < 0:
		return fmt.Errorf("%w: History %v is negative", ErrInvalidConfig, c.History)
	case e.HistoryStep < time.Millisecond:
		return fmt.Errorf("%w: HistoryStep %v is below 1ms", ErrInvalidConfig, c.HistoryStep)
	case e.HistoryStep > e.History:
		return fmt.Errorf("%w: HistoryStep %v is above History %v", ErrInvalidConfig, e.HistoryStep, e.History)
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
	frames frameFunc // builds one tick's frame
	cfg    Config    // effective
	log    *slog.Logger
	hist   *history

	mu      sync.Mutex
	hubs    map[time.Duration]*hub // one per distinct delay with clients
	clients map[*client]struct{}   // connections served now, across hubs
	servers map[*http.Server]bool  // servers whose Shutdown ends their clients: true once it began
	closed  bool                   // Close was called
	idle    chan struct{}          // closed once closed and no client is left
}

// NewStream returns the stream handler publishing src's snapshots. It fails,
// wrapping ErrInvalidConfig, if src is nil (a nil interface, or one holding
// a nil pointer such as a nil *command.Registry), cfg is invalid or sets a
// Control (a stream serves none).
func NewStream(src Source, cfg Config) (*Stream, error) {
	if err := checkSource(src); err != nil {
		return nil, err
	}
	if cfg.Control != nil {
		return nil, fmt.Errorf("%w: Control is set, but a stream serves no control endpoint: use New, or mount it yourself", ErrInvalidConfig)
	}
	return newStream(cfg, func(e *encoder, sizeHint int) ([]byte, error) {
		return e.encode(src.Snapshot(), sizeHint)
	})
}

// frameFunc builds one tick's frame with a hub's encoder; sizeHint is the
// previous frame's length.
type frameFunc func(e *encoder, sizeHint int) ([]byte, error)

// newStream returns a stream whose hubs build their frames with frames,
// followed by the events of cfg.Extra.
func newStream(cfg Config, frames frameFunc) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if extra := cfg.Extra; extra != nil {
		own := frames
		frames = func(e *encoder, sizeHint int) ([]byte, error) {
			data, err := own(e, sizeHint)
			if err != nil {
				return data, err
			}
			return appendExtra(data, extra())
		}
	}
	return &Stream{
		frames:  frames,
		cfg:     cfg,
		log:     cfg.Logger,
		hist:    newHistory(cfg.History, cfg.HistoryStep),
		hubs:    make(map[time.Duration]*hub),
		clients: make(map[*client]struct{}),
		servers: make(map[*http.Server]bool),
		idle:    make(chan struct{}),
	}, nil
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
	return len(s.clients)
}

// ServeHTTP streams frames until the client goes away, the stream is
// closed, its server shuts down, or a frame cannot be written within
// WriteTimeout. It answers 405 to anything but GET, 400 to a ?delay= that is
// not a positive integer number of milliseconds, and 503 past MaxClients,
// after Close, or once its server's Shutdown has begun.
//
// An HTTP/1.x request whose ResponseWriter can be hijacked is served on the
// connection taken over from net/http (see the package doc, "Stalled
// clients, Close and Shutdown"); any other request through the ResponseWriter.
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
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	c := newClient(srv)
	c.first = s.hist.frame(time.Now().UnixMilli())
	h, err := s.join(delay, c)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer s.leave(h, c)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream;charset=UTF-8")
	hdr.Set("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate")
	hdr.Set("Pragma", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Accel-Buffering", "no") // no proxy buffering (nginx)

	if r.ProtoMajor == 1 {
		conn, brw, err := http.NewResponseController(w).Hijack()
		switch {
		case err == nil:
			s.serveConn(conn, brw, c, hdr, r.RemoteAddr, delay)
			return
		case !errors.Is(err, http.ErrNotSupported):
			s.log.Warn("dashboard: cannot take over the stream connection", "remote", r.RemoteAddr, "err", err)
			return
		}
	}
	s.serveWriter(w, r, c, delay)
}

// serveWriter streams through w, for a request whose connection cannot be
// taken over (HTTP/2, a ResponseWriter wrapper without Hijack). The request
// context tells that the client went away.
func (s *Stream) serveWriter(w http.ResponseWriter, r *http.Request, c *client, delay time.Duration) {
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(data []byte) error { return s.write(w, rc, data) }
	if err := write(nil); err != nil {
		s.log.Debug("dashboard: stream client gone", "remote", r.RemoteAddr, "err", err)
		return
	}
	s.pump(c, r.Context().Done(), write, r.RemoteAddr, delay)
}

// pump writes every frame offered to c until a write fails (it returns
// that error), gone is closed or c is ended (it returns nil).
func (s *Stream) pump(c *client, gone <-chan struct{}, write func([]byte) error, remote string, delay time.Duration) error {
	s.log.Debug("dashboard: stream client connected", "remote", remote, "delay", delay)
	if len(c.first) > 0 {
		if err := write(c.first); err != nil {
			s.log.Info("dashboard: stream client dropped", "remote", remote, "err", err)
			return err
		}
	}
	for {
		select {
		case <-gone:
			s.log.Debug("dashboard: stream client left", "remote", remote)
			return nil
		case <-c.quit:
			s.log.Debug("dashboard: stream client ended: stream closed or server shutting down", "remote", remote)
			return nil
		case <-c.wake:
		}
		f := c.next.Swap(nil)
		if f == nil {
			continue
		}
		if err := write(f.data); err != nil {
			s.log.Info("dashboard: stream client dropped", "remote", remote, "err", err)
			return err
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
// first client, unless MaxClients are served already, the stream is closed
// or c's server is shutting down. The first client of a server registers
// the Shutdown hook that ends that server's clients.
func (s *Stream) join(delay time.Duration, c *client) (*hub, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, errors.New("dashboard: stream closed")
	case c.srv != nil && s.servers[c.srv]:
		return nil, errors.New("dashboard: server shutting down")
	case len(s.clients) >= s.cfg.MaxClients:
		return nil, fmt.Errorf("dashboard: stream connection limit reached (%d)", s.cfg.MaxClients)
	}
	if srv := c.srv; srv != nil {
		if _, ok := s.servers[srv]; !ok {
			s.servers[srv] = false
			srv.RegisterOnShutdown(func() { s.shutdown(srv) })
		}
	}
	s.clients[c] = struct{}{}
	h := s.hubs[delay]
	if h == nil {
		h = newHub(s, delay)
		s.hubs[delay] = h
		go h.run()
	}
	h.add(c)
	return h, nil
}

// leave unregisters c; the last client of a hub stops it and waits for its
// goroutine to end, so no goroutine outlives the last handler. c's slot is
// freed once that is done.
func (s *Stream) leave(h *hub, c *client) {
	s.mu.Lock()
	last := h.remove(c)
	if last {
		delete(s.hubs, h.delay)
		close(h.stop)
	}
	s.mu.Unlock()
	if last {
		<-h.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, c)
	if s.closed && len(s.clients) == 0 {
		close(s.idle)
	}
}

// shutdown is the Shutdown hook of srv: it ends srv's clients and refuses
// new ones from srv.
func (s *Stream) shutdown(srv *http.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers[srv] = true
	for c := range s.clients {
		if c.srv == srv {
			c.end()
		}
	}
}

// Close ends every stream connection, answers later stream requests 503,
// and waits until every stream handler has returned (and with it every
// goroutine of the stream) or ctx ends, whichever comes first. It returns
// nil once nothing is left running, at once if nothing was, even with an
// ended ctx; otherwise an error wrapping ctx.Err(). Handlers end within
// about WriteTimeout, except those writing to a ResponseWriter without
// write deadlines to a client that does not read. Closing twice is safe.
//
// http.Server.Close does not end the connections the stream took over
// (http.Server.Shutdown does, see the package doc): call Close with it.
func (s *Stream) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for c := range s.clients {
			c.end()
		}
		if len(s.clients) == 0 {
			close(s.idle)
		}
	}
	s.mu.Unlock()
	select {
	case <-s.idle:
		return nil
	default:
	}
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dashboard: %d stream clients still ending: %w", s.Clients(), ctx.Err())
	}
}
