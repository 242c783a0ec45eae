package fleet

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy stands between a fleet and Redis and injects delays: every chunk
// is forwarded after delay, each way, and while held, Redis's replies wait
// at the proxy (a sync is then in flight: Redis has executed it, the fleet
// has not seen the answer).
type proxy struct {
	addr   string
	target string
	delay  time.Duration
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond
	closed  bool
	holding bool
	conns   []net.Conn
	held    chan struct{} // a reply reached the proxy while holding
}

// newProxy listens on a free loopback port and forwards to target.
func newProxy(t testing.TB, target string, delay time.Duration) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, delay: delay, ln: ln, held: make(chan struct{}, 1)}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, false)
		go p.pipe(c, s, true)
	}
}

// pipe copies from src to dst; reply says it carries Redis's answers.
func (p *proxy) pipe(dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			time.Sleep(p.delay)
			if reply && !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

// wait blocks a reply while the proxy holds; false once it is closed.
func (p *proxy) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding {
		select {
		case p.held <- struct{}{}:
		default:
		}
	}
	for p.holding {
		p.cond.Wait()
	}
	return !p.closed
}

// hold makes replies wait at the proxy until release; it returns a channel
// that receives once a reply is waiting.
func (p *proxy) hold() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.held:
	default:
	}
	p.holding = true
	return p.held
}

// release lets the held replies through.
func (p *proxy) release() {
	p.mu.Lock()
	p.holding = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.mu.Lock()
	was := p.closed
	p.closed = true
	conns := p.conns
	p.holding = false
	p.cond.Broadcast()
	p.mu.Unlock()
	if was {
		return
	}
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}
