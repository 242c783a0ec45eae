package httpguard

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestTransportReadOnlyRefusesWritesOnly: in read-only mode a POST never
// leaves (READ_ONLY, a 503 with X-Degraded "read_only" when degrading,
// command.ErrRefused otherwise) while GET and HEAD go through.
func TestTransportReadOnlyRefusesWritesOnly(t *testing.T) {
	for _, degrade := range []bool{true, false} {
		var code atomic.Int32
		code.Store(http.StatusOK)
		srv := statusServer(t, &code)
		clock := new(metrics.ManualClock)
		tr, tracker, reg := newTestTransport(t, Config{Degrade: degrade,
			Group: command.GroupConfig{Strategy: command.Semaphore}}, clock)
		reg.SetReadOnly(true)

		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, err := http.NewRequest(method, srv.URL, nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err, method)
			assert.Equal(t, http.StatusOK, resp.StatusCode, method)
			require.NoError(t, resp.Body.Close())
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("order"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		if degrade {
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, "read_only", resp.Header.Get("X-Degraded"))
			require.NoError(t, resp.Body.Close())
		} else {
			require.ErrorIs(t, err, command.ErrRefused)
		}
		c := counts(t, groupOf(t, reg, srv), "POST")
		assert.EqualValues(t, 1, c[metrics.ReadOnly])
		assert.EqualValues(t, 2, groupOf(t, reg, srv).Breaker().Snapshot().Health.Requests, "only the reads reached the host")
		tracker.requireClosedOnce(t)
	}
}
