package circuit

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/internal/logtest"
)

// TestAntiPatternsWarnAtCreation: each anti-pattern the source names is
// accepted and logged once at Warn, naming its rule; a sound configuration
// logs nothing.
func TestAntiPatternsWarnAtCreation(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		rules []string
	}{
		{"defaults", Config{}, nil},
		{"open 100ms", Config{OpenDuration: 100 * time.Millisecond}, []string{ruleOpenTooShort}},
		{"open 101ms", Config{OpenDuration: 101 * time.Millisecond}, nil},
		{"min 1", Config{MinRequests: 1}, []string{ruleMinRequestsOne}},
		{"min 2", Config{MinRequests: 2}, nil},
		{"probes 11", Config{HalfOpenProbes: 11}, []string{ruleHalfOpenFlood}},
		{"probes 10", Config{HalfOpenProbes: 10}, nil},
		{"all three", Config{OpenDuration: 50 * time.Millisecond, MinRequests: 1,
			HalfOpenProbes: 1000}, []string{ruleOpenTooShort, ruleMinRequestsOne, ruleHalfOpenFlood}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs logtest.Buffer
			c.cfg.Name = "dep"
			c.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			_, err := New(c.cfg)
			require.NoError(t, err, "an anti-pattern is valid: warned, not refused")
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if c.rules == nil {
				assert.Empty(t, logs.String())
				return
			}
			require.Len(t, lines, len(c.rules), logs.String())
			for i, rule := range c.rules {
				assert.Contains(t, lines[i], "level=WARN")
				assert.Contains(t, lines[i], "rule="+rule)
				assert.Contains(t, lines[i], "breaker=dep")
			}
		})
	}
}

// TestAntiPatternNotWarnedOnInvalid: an invalid config is an error, with no
// warning beside it.
func TestAntiPatternNotWarnedOnInvalid(t *testing.T) {
	var logs logtest.Buffer
	_, err := New(Config{MinRequests: 1, FailureRatio: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Empty(t, logs.String())
}
