// Package redistest runs real redis-server processes for the tests of the
// modules that speak to Redis (fleet state, the durable queue). Nothing is
// mocked: a test gets the address of a redis-server on loopback.
//
// Shared returns the instance scripts/test.sh starts (BULWARK_REDIS_ADDR),
// or starts one for the test binary when that is unset. Start always starts
// a private instance, for tests that kill, pause or restart it. Without the
// redis-server binary a test is skipped with the command that installs it,
// except under CI (CI set), where it fails: CI must run these tests.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process on loopback, with no persistence.
type Server struct {
	// Addr is host:port, stable across Restart.
	Addr string

	t   testing.TB
	bin string
	mu  sync.Mutex
	cmd *exec.Cmd
}

// Shared returns the address of a Redis server the test may use but must
// not stop: BULWARK_REDIS_ADDR when set (scripts/test.sh sets it), else a
// server started with Start and stopped when t ends. Tests sharing it must
// use their own keys (for example, a prefix made of t.Name()).
func Shared(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv("BULWARK_REDIS_ADDR"); addr != "" {
		return addr
	}
	return Start(t).Addr
}

// Start starts a private redis-server on a free loopback port and stops it
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		const hint = "redis-server not found; install it with: apt-get install redis-server"
		if os.Getenv("CI") != "" {
			t.Fatal(hint)
		}
		t.Skip(hint)
	}
	s := &Server{t: t, bin: bin, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs redis-server on s.Addr and waits until it answers PING.
func (s *Server) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(s.bin, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(s.Addr)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("redistest: redis-server on %s never answered: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends PING over a new connection and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// signal sends sig to the running process, if any.
func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit. Calling it
// again, or on a stopped server, does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process must run to die promptly
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Pause stops the process (SIGSTOP): connections stay open and nothing
// answers, as in a network partition or a long GC-like stall.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Restart kills the server and starts a new, empty one on the same address.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}
