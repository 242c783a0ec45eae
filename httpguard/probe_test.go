package httpguard

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// probeServer answers 500 and records the ProbeHeader of each request.
type probeServer struct {
	*httptest.Server
	mu     sync.Mutex
	probes []string
}

func newProbeServer(t *testing.T) *probeServer {
	s := &probeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.probes = append(s.probes, r.Header.Get(ProbeHeader))
		s.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *probeServer) headers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.probes...)
}

// probeTransport's groups trip on one failure, stay open 1 s on the manual
// clock, and close on one good probe.
func probeTransport(t *testing.T, classify func(error) metrics.Event) (*Transport, *metrics.ManualClock, *command.Registry) {
	clock := new(metrics.ManualClock)
	tr, _, reg := newTestTransport(t, Config{Group: command.GroupConfig{
		CommandBreaker:  circuit.Config{MinRequests: 1, OpenDuration: time.Second, HalfOpenSuccesses: 1},
		ProbeClassifier: classify,
	}}, clock)
	return tr, clock, reg
}

// TestTransportTagsProbes: only the half-open probe carries
// X-Breaker-Probe: 1, and the caller's request is left untouched.
func TestTransportTagsProbes(t *testing.T) {
	srv := newProbeServer(t)
	tr, clock, _ := probeTransport(t, nil)
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req) // trips the breaker
	require.NoError(t, err)
	readAll(t, resp)
	clock.Advance(time.Second)
	resp, err = tr.RoundTrip(req) // the probe
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, []string{"", "1"}, srv.headers())
	require.Empty(t, req.Header.Get(ProbeHeader), "the caller's request is not modified")
}

// TestProbeReachableClosesOnA500: with ProbeReachable, a probe answered by
// a 500 closes the breaker (the host answered); without it, it reopens.
// The caller gets the 500 either way.
func TestProbeReachableClosesOnA500(t *testing.T) {
	for _, tc := range []struct {
		name     string
		classify func(error) metrics.Event
		want     circuit.State
	}{
		{"ProbeReachable", ProbeReachable, circuit.Closed},
		{"no classifier", nil, circuit.Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newProbeServer(t)
			tr, clock, reg := probeTransport(t, tc.classify)
			for range 2 {
				resp, err := get(t, tr, srv.URL)
				require.NoError(t, err)
				require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
				readAll(t, resp)
				clock.Advance(time.Second)
			}
			require.Equal(t, []string{"", "1"}, srv.headers())
			b := commandBreaker(t, groupOf(t, reg, srv.Server), http.MethodGet)
			clock.Advance(-time.Second)
			require.Equal(t, tc.want, b.State())
		})
	}
}

// TestProbeReachableFailsWithoutAnAnswer: an error with no response fails
// the probe.
func TestProbeReachableFailsWithoutAnAnswer(t *testing.T) {
	require.Equal(t, metrics.Failure, ProbeReachable(http.ErrServerClosed))
	require.Equal(t, metrics.Success, ProbeReachable(&statusError{status: "502 Bad Gateway"}))
}
