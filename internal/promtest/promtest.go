// Package promtest runs the real Prometheus tools for the tests that check
// what bulwark hands them (the prom module's rules, routes and scrapes;
// package alert's webhook): prometheus and prometheus-alertmanager as
// processes on a free loopback port, promtool and amtool as commands.
// Nothing is mocked. Without a tool a test is skipped with the command
// that installs it, except under CI (CI set), where it fails: CI must run
// these tests (scripts/test.sh installs the Debian packages).
package promtest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/internal/logtest"
)

// Tool returns the path of the Prometheus tool name (prometheus, promtool,
// prometheus-alertmanager, amtool), skipping the test (failing it under
// CI) when it is not installed.
func Tool(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		pkg := "prometheus"
		if name == "amtool" || name == "prometheus-alertmanager" {
			pkg = "prometheus-alertmanager"
		}
		hint := name + " not found; install it with: apt-get install " + pkg
		if os.Getenv("CI") != "" {
			t.Fatal(hint)
		}
		t.Skip(hint)
	}
	return bin
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Eventually calls f every 200 ms until it returns nil, failing the test
// with f's last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Server is a Prometheus server process (prometheus or
// prometheus-alertmanager) on loopback.
type Server struct {
	URL    string       // http://127.0.0.1:port
	Client *http.Client // for its API; 5 s timeout
}

// Start runs the Prometheus server bin with args and
// --web.listen-address on a free loopback port, waits until its /-/ready
// answers, and stops it (SIGTERM, then kill after 20 s) when t ends; its
// output is logged if t failed.
func Start(t testing.TB, bin string, args ...string) *Server {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
	logs := &logtest.Buffer{}
	cmd := exec.Command(bin, append(args, "--web.listen-address="+addr)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	s := &Server{URL: "http://" + addr, Client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}}
	name := filepath.Base(bin)
	t.Cleanup(func() {
		s.Client.CloseIdleConnections()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})
	Eventually(t, 60*time.Second, name+" ready", func() error {
		resp, err := s.Client.Get(s.URL + "/-/ready")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return s
}

// Alertmanager starts prometheus-alertmanager with the configuration
// config (YAML), a fresh storage directory and no cluster, as Start does.
func Alertmanager(t testing.TB, config string) *Server {
	t.Helper()
	bin := Tool(t, "prometheus-alertmanager")
	dir := t.TempDir()
	file := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return Start(t, bin, "--config.file="+file, "--storage.path="+filepath.Join(dir, "data"), "--cluster.listen-address=")
}
