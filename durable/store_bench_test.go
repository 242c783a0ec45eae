package durable_test

import (
	"path/filepath"
	"testing"

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
