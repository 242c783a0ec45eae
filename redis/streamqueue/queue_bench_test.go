package streamqueue_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
	"github.com/bulwark-go/bulwark/internal/redistest"
	"github.com/bulwark-go/bulwark/redis/streamqueue"
)

// BenchmarkStreamEnqueue: the Redis backend's enqueue, one script (XADD and
// the key's record) acknowledged by a redis-server on loopback.
// go test -run '^$' -bench StreamEnqueue ./streamqueue/
func BenchmarkStreamEnqueue(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Shared(b)})
	defer rdb.Close()
	q, err := streamqueue.New(b.Context(), streamqueue.Config{Client: rdb, Name: "bench-" + b.Name()})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	queuetest.BenchmarkEnqueue(b, q)
	rdb.Del(b.Context(), "bulwark:queue:{bench-"+b.Name()+"}:stream", "bulwark:queue:{bench-"+b.Name()+"}:keys")
}

// BenchmarkStreamAck: the Redis backend's Ack, one script (the key, the
// outcome record, XACK and XDEL) that, past 1,000 records, also drops the
// oldest. go test -run '^$' -bench StreamAck ./streamqueue/
func BenchmarkStreamAck(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Shared(b)})
	defer rdb.Close()
	name := "bench-" + b.Name()
	q, err := streamqueue.New(b.Context(), streamqueue.Config{Client: rdb, Name: name, Retention: durable.Retention{Records: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	queuetest.BenchmarkAck(b, q)
	p := "bulwark:queue:{" + name + "}:"
	rdb.Del(b.Context(), p+"stream", p+"keys", p+"applied", p+"meta", p+"outcome", p+"order")
}
