package windowed

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/metrics"
)

// step is one write of a walk: the instant written at, and two instants to
// read at, one in or around the window and one behind it.
type step struct {
	seed  uint64
	i     int
	now   time.Duration
	reads [2]time.Duration
	rng   *rand.Rand
}

// walk takes, for each of 200 seeds (of stream), the random walk of
// instants that metrics' TestRollingMatchesModel takes: a window drawn from
// three, a start near the clock's origin or near either end of its range,
// and 400 steps within a bucket, to a bucket's edge, back or far ahead.
// start is given the seed's window and random source and returns the
// function each step of that seed is given to.
func walk(t *testing.T, stream uint64, start func(w metrics.Window, rng *rand.Rand) func(s step)) {
	t.Helper()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, stream))
		w := []metrics.Window{{Length: time.Second, Buckets: 10}, {Length: 3 * time.Millisecond, Buckets: 3},
			{Length: time.Duration(1<<20) * 8, Buckets: 8}}[rng.IntN(3)]
		f := start(w, rng)
		width, n := int64(w.BucketWidth()), int64(w.Buckets)
		bases := []int64{0, -5 * width, 1 << 62, -(1 << 62), math.MaxInt64 - 3*width, math.MinInt64 + 2*width}
		now := bases[rng.IntN(len(bases))]
		for i := range 400 {
			switch x := rng.IntN(10); {
			case x < 4:
				now += rng.Int64N(width / 2)
			case x < 6:
				now = (now/width+1)*width - rng.Int64N(2) // an edge, or just below it
			case x < 7:
				now -= rng.Int64N(2 * width * n)
			case x < 8:
				now += rng.Int64N(2 * width * n)
			}
			reads := [2]time.Duration{time.Duration(now + rng.Int64N(width*n) - width), time.Duration(now - rng.Int64N(2*width*n))}
			f(step{seed: seed, i: i, now: time.Duration(now), reads: reads, rng: rng})
		}
	}
}
