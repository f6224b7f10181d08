package bench

import (
	"math"
	"slices"
	"time"
)

// Stat summarises the repetitions of one measurement: the minimum, the
// median and the maximum of N values.
type Stat struct {
	Min, Median, Max float64
	N                int
}

// Summarize returns the min–median–max of values (the zero Stat for none).
// The median of an even count is the mean of the two middle values.
func Summarize(values []float64) Stat {
	if len(values) == 0 {
		return Stat{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Stat{Min: v[0], Median: med, Max: v[n-1], N: n}
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest value such that at least p% of the
// values are less than or equal to it. sorted must be in ascending order.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Latencies is a set of latency samples.
type Latencies []time.Duration

// P50 and P99 sort l in place and return its percentiles.
func (l Latencies) P50() time.Duration { slices.Sort(l); return Percentile(l, 50) }

// P99 sorts l in place and returns its 99th percentile.
func (l Latencies) P99() time.Duration { slices.Sort(l); return Percentile(l, 99) }

// ratios divides each figure by the limit of the same repetition.
func ratios(fig, lim []float64) []float64 {
	out := make([]float64, 0, min(len(fig), len(lim)))
	for i := range min(len(fig), len(lim)) {
		if lim[i] > 0 {
			out = append(out, fig[i]/lim[i])
		}
	}
	return out
}
