package fleet

import (
	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/metrics"
)

// evidence is what the windows of one sync say about a dependency.
type evidence struct {
	instances int            // windows counted
	failing   int            // of them, failing on their own (see failing)
	sum       metrics.Counts // their sum
	open      bool           // the quorum holds: the fleet opens
}

// judge weighs the windows counted for a breaker of effective config cfg
// (one per instance, its own included when it counts) against quorum q.
func judge(cfg circuit.Config, q Quorum, windows []metrics.Counts) evidence {
	var e evidence
	for _, w := range windows {
		e.instances++
		if failing(cfg, w, 1) {
			e.failing++
		}
		for i := range e.sum {
			e.sum[i] += w[i]
		}
	}
	ratio := q.Ratio
	if ratio == 0 {
		ratio = cfg.FailureRatio
	}
	e.open = e.failing >= q.Instances && calls(e.sum) >= int64(cfg.MinRequests) &&
		(bad(e.sum) >= 1 && share(bad(e.sum), e.sum) >= ratio ||
			cfg.SlowCallDuration > 0 && e.sum[metrics.Slow] >= 1 && share(e.sum[metrics.Slow], e.sum) >= cfg.SlowCallRatio)
	return e
}

// failing reports whether window w shows its instance's calls failing at
// the thresholds of cfg: at least `least` failed or timed-out calls at
// FailureRatio or above, or (slow-call detection on) at least `least` slow
// calls at SlowCallRatio or above.
func failing(cfg circuit.Config, w metrics.Counts, least int64) bool {
	return bad(w) >= least && share(bad(w), w) >= cfg.FailureRatio ||
		cfg.SlowCallDuration > 0 && w[metrics.Slow] >= least && share(w[metrics.Slow], w) >= cfg.SlowCallRatio
}

// healthy reports whether window w shows its instance's own calls healthy:
// at least MinRequests of them, below both ratios of cfg.
func healthy(cfg circuit.Config, w metrics.Counts) bool {
	return calls(w) >= int64(cfg.MinRequests) && !failing(cfg, w, 0)
}

// calls is the count of calls that reached the dependency.
func calls(w metrics.Counts) int64 {
	return w[metrics.Success] + w[metrics.Failure] + w[metrics.Timeout]
}

// bad is the count of failed and timed-out calls.
func bad(w metrics.Counts) int64 { return w[metrics.Failure] + w[metrics.Timeout] }

// share is n over the calls of w; 0 with none.
func share(n int64, w metrics.Counts) float64 {
	if c := calls(w); c > 0 {
		return float64(n) / float64(c)
	}
	return 0
}
