package dashboard

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"time"
)

// serveConn streams to an HTTP/1.x connection taken over from net/http, so
// that the stream controls its socket: a small send buffer (WriteBuffer),
// so that a client which stops reading blocks the next write almost at
// once, and a write deadline of WriteTimeout on each write. It writes the
// response head itself (status 200, hdr, "Connection: close"); the body runs
// until the connection closes. A goroutine reads (and discards) what the
// client sends, to see it close the connection: the request context does
// not end with a connection taken over. serveConn closes conn and returns
// once its reader has ended too.
func (s *Stream) serveConn(conn net.Conn, brw *bufio.ReadWriter, c *client, hdr http.Header, remote string, delay time.Duration) {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = io.Copy(io.Discard, brw.Reader)
	}()
	defer func() {
		_ = conn.Close()
		<-gone
	}()

	raw := netConn(conn)
	if b, ok := raw.(interface{ SetWriteBuffer(int) error }); ok {
		if err := b.SetWriteBuffer(s.cfg.WriteBuffer); err != nil {
			s.log.Debug("dashboard: cannot shrink the stream's send buffer", "remote", remote, "err", err)
		}
	}
	write := func(data []byte) error {
		if err := conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
			return err
		}
		_, err := conn.Write(data)
		return err
	}

	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	hdr.Set("Connection", "close")
	hdr.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	_ = hdr.Write(&head) // a bytes.Buffer does not fail
	head.WriteString("\r\n")
	err := write(head.Bytes())
	if err != nil {
		s.log.Debug("dashboard: stream client gone", "remote", remote, "err", err)
	} else {
		err = s.pump(c, gone, write, remote, delay)
	}
	if tcp, ok := raw.(*net.TCPConn); ok && err != nil {
		// A client that did not take the bytes already queued for it will
		// not take them later: reset the connection rather than let the
		// system keep them (and the socket) for minutes.
		_ = tcp.SetLinger(0)
	}
}

// netConn returns the connection under conn: conn itself, or what a
// wrapper such as *tls.Conn holds (its NetConn method).
func netConn(conn net.Conn) net.Conn {
	for {
		w, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return conn
		}
		conn = w.NetConn()
	}
}
