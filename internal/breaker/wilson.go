package breaker

import "math"

// zScore returns the quantile of the standard normal distribution that a
// two-sided interval at confidence c spans on each side (1.96 at 0.95), or
// 0 for c = 0 (the confidence rule off).
func zScore(c float64) float64 {
	if c <= 0 {
		return 0
	}
	return math.Sqrt2 * math.Erfinv(c)
}

// wilsonLower returns the lower bound of the Wilson score interval, at the
// normal quantile z, for the ratio of k events among n trials; 0 for n = 0.
// Unlike the normal approximation, it stays within [0, 1] and is honest at
// small n: 10 failures in 20 calls (a ratio of 0.5) give a lower bound of
// 0.30 at z = 1.96, while 1,000 in 2,000 give 0.48.
func wilsonLower(k, n int64, z float64) float64 {
	if n <= 0 {
		return 0
	}
	fn := float64(n)
	p := float64(k) / fn
	z2 := z * z
	centre := p + z2/(2*fn)
	spread := z * math.Sqrt(p*(1-p)/fn+z2/(4*fn*fn))
	return max((centre-spread)/(1+z2/fn), 0)
}
