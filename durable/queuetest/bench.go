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

// BenchmarkAck measures what a replay's acknowledgement costs: one Ack of
// a leased entry, durable on return, which records the key as applied and
// writes the entry's outcome record. Open q with a Retention.Records
// smaller than the iterations to measure Acks that also drop the oldest
// record, as a queue at its bound does. The entries are enqueued and
// leased, 64 at a time, off the clock.
func BenchmarkAck(b *testing.B, q durable.Queue) {
	ctx := context.Background()
	var leased []durable.Entry
	for i := 0; i < b.N; i++ {
		if len(leased) == 0 {
			b.StopTimer()
			for j := range 64 {
				if _, err := q.Enqueue(ctx, durable.Entry{Key: fmt.Sprint("bench-ack-", i, "-", j), Command: "write"}); err != nil {
					b.Fatal(err)
				}
			}
			es, err := q.Lease(ctx, time.Now(), 64)
			if err != nil || len(es) == 0 {
				b.Fatal(len(es), err)
			}
			leased = es
			b.StartTimer()
		}
		if err := q.Ack(ctx, leased[0]); err != nil {
			b.Fatal(err)
		}
		leased = leased[1:]
	}
}
