package queuetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/durable"
)

// BenchmarkEnqueue measures what a deferred write costs the caller: one
// Enqueue of a 256-byte payload, durable on return. Besides ns/op it
// reports the p50 and p99 of the individual calls (p50-ns, p99-ns).
func BenchmarkEnqueue(b *testing.B, q durable.Queue) {
	ctx := context.Background()
	payload := make([]byte, 256)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := q.Enqueue(ctx, durable.Entry{Key: fmt.Sprint("bench-", i), Command: "write", Payload: payload}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	}
}
