package faultinject

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// pools holds a Transport's imitated connection pools, one per scheme and
// host:port, as an http.Transport keeps its own.
type pools struct {
	mu    sync.Mutex
	hosts map[string]*hostPool
}

// of returns the pool of req's scheme and host.
func (ps *pools) of(req *http.Request) *hostPool {
	key := poolKey(req)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.hosts[key]
	if !ok {
		if ps.hosts == nil {
			ps.hosts = make(map[string]*hostPool)
		}
		p = new(hostPool)
		ps.hosts[key] = p
	}
	return p
}

// poolKey is req's scheme and host:port, lower case, the port made
// explicit (":80" for http, ":443" for https).
func poolKey(req *http.Request) string {
	scheme, host := strings.ToLower(req.URL.Scheme), strings.ToLower(req.URL.Hostname())
	port := req.URL.Port()
	if port == "" {
		port = "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// hostPool is the imitated pool of one host: the connections that
// PoolHeld leaves free, handed out in order of arrival.
type hostPool struct {
	mu      sync.Mutex
	busy    int       // connections handed out and not yet freed
	waiting list.List // of chan struct{}, oldest first; closed when handed a connection
}

// acquire waits for a free connection of p under the pool of f, and
// returns it; or it returns context.Cause(ctx) (the error net/http's
// Transport returns for a request whose context ends while it waits for
// a connection) when ctx ends first. A connection is handed out at once,
// without a wait, when f no longer imitates a pool.
func (p *hostPool) acquire(ctx context.Context, f *Faults) (*conn, error) {
	changed := f.changes()
	p.mu.Lock()
	if free, limited := f.poolFree(); p.waiting.Len() == 0 && (!limited || p.busy < free) {
		p.busy++
		p.mu.Unlock()
		return &conn{pool: p, faults: f}, nil
	}
	ready := make(chan struct{})
	e := p.waiting.PushBack(ready)
	p.mu.Unlock()
	for {
		select {
		case <-ready:
			return &conn{pool: p, faults: f}, nil
		case <-changed:
			// Enable, Disable or Set may have freed connections.
			changed = f.changes()
			p.mu.Lock()
			p.handOutLocked(f)
			p.mu.Unlock()
		case <-ctx.Done():
			p.mu.Lock()
			select {
			case <-ready: // handed a connection as ctx ended: pass it on
				p.busy--
				p.handOutLocked(f)
			default:
				p.waiting.Remove(e)
			}
			p.mu.Unlock()
			return nil, context.Cause(ctx)
		}
	}
}

// handOutLocked hands the free connections to the oldest waiters. p.mu
// must be held.
func (p *hostPool) handOutLocked(f *Faults) {
	free, limited := f.poolFree()
	for p.waiting.Len() > 0 && (!limited || p.busy < free) {
		close(p.waiting.Remove(p.waiting.Front()).(chan struct{}))
		p.busy++
	}
}

// conn is a connection of an imitated pool, held by one request.
type conn struct {
	pool   *hostPool
	faults *Faults
	freed  atomic.Bool
}

// free returns c to its pool, once; a nil c does nothing.
func (c *conn) free() {
	if c == nil || c.freed.Swap(true) {
		return
	}
	p := c.pool
	p.mu.Lock()
	p.busy--
	p.handOutLocked(c.faults)
	p.mu.Unlock()
}

// heldBody is a response body that holds its request's connection, as an
// http.Transport's does: until it is closed or a Read returns an error
// (io.EOF included).
type heldBody struct {
	io.ReadCloser
	conn *conn
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.conn.free()
	}
	return n, err
}

// Close closes the body and frees its connection.
func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.conn.free()
	return err
}
