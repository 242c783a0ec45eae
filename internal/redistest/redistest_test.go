package redistest

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr); err != nil {
		t.Fatalf("fresh server: %v", err)
	}
	s.Pause()
	if err := ping(s.Addr); err == nil {
		t.Fatal("a paused server answered PING")
	}
	s.Resume()
	if err := ping(s.Addr); err != nil {
		t.Fatalf("resumed server: %v", err)
	}
	s.Restart()
	if err := ping(s.Addr); err != nil {
		t.Fatalf("restarted server on the same address: %v", err)
	}
	s.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for ping(s.Addr) == nil {
		if time.Now().After(deadline) {
			t.Fatal("killed server still answers")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSharedPrefersTheScriptsServer(t *testing.T) {
	t.Setenv("BULWARK_REDIS_ADDR", "127.0.0.1:1")
	if got := Shared(t); got != "127.0.0.1:1" {
		t.Fatalf("Shared = %q, want BULWARK_REDIS_ADDR", got)
	}
}
