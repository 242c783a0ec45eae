package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
)

// BenchmarkStoreEnqueue: the embedded store's enqueue, one fsync'd bbolt
// commit per write. go test -run '^$' -bench StoreEnqueue ./
func BenchmarkStoreEnqueue(b *testing.B) {
	s, err := durable.OpenStore(filepath.Join(b.TempDir(), "queue.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	queuetest.BenchmarkEnqueue(b, s)
}

// BenchmarkStoreAck: the embedded store's Ack, one fsync'd bbolt commit
// that records the key, writes the outcome record and, past 1,000 records,
// drops the oldest. go test -run '^$' -bench StoreAck ./
func BenchmarkStoreAck(b *testing.B) {
	s, err := durable.OpenStore(filepath.Join(b.TempDir(), "queue.db"), durable.KeepOutcomes(durable.Retention{Records: 1000}))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	queuetest.BenchmarkAck(b, s)
}

// BenchmarkOpenStore: OpenStore of a queue file holding 20,000 applied
// keys and 1,000 pending entries, which it reads whole to verify it
// (file-mb: the file's size). go test -run '^$' -bench OpenStore ./
func BenchmarkOpenStore(b *testing.B) {
	path := filepath.Join(b.TempDir(), "queue.db")
	s, err := durable.OpenStore(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := make([]byte, 256)
	for i := range 21000 {
		_, err := s.Enqueue(ctx, durable.Entry{Key: fmt.Sprint("bench-", i), Command: "write", Payload: payload})
		if err != nil {
			b.Fatal(err)
		}
	}
	es, err := s.Lease(ctx, time.Now(), 20000)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range es {
		if err := s.Ack(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := durable.OpenStore(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-mb")
}
