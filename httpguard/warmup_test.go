package httpguard

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
)

// TestTransportWarmUpPerHost: a Transport's group is a host, created on
// the host's first request, so a breaker WarmUp in Config.Group warms each
// host apart: a host added later fails during its first minute without
// tripping its breakers, while an old host's outage trips its own.
func TestTransportWarmUpPerHost(t *testing.T) {
	clock := new(metrics.ManualClock)
	b := circuit.Config{MinRequests: 20, WarmUp: time.Minute}
	tr, tracker, reg := newTestTransport(t, Config{Group: command.GroupConfig{Strategy: command.Semaphore,
		Breaker: b, CommandBreaker: b}}, clock)
	var oldCode, newCode atomic.Int32
	oldCode.Store(http.StatusOK)
	old := statusServer(t, &oldCode)
	send := func(url string, n int) {
		for range n {
			resp, err := get(t, tr, url)
			if err == nil {
				require.NoError(t, resp.Body.Close())
			}
		}
	}
	send(old.URL, 1) // the old host's group, created now
	clock.Advance(2 * time.Minute)

	newCode.Store(http.StatusInternalServerError)
	fresh := statusServer(t, &newCode)
	send(fresh.URL, 30) // a new instance with cold caches
	assert.Equal(t, circuit.Closed, groupOf(t, reg, fresh).Breaker().State(), "the new host is warming up")

	oldCode.Store(http.StatusInternalServerError)
	send(old.URL, 30)
	assert.Equal(t, circuit.Open, groupOf(t, reg, old).Breaker().State(), "the warm host's outage trips its breaker")
	tracker.requireClosedOnce(t)
}
