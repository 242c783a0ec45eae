package streamqueue_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/durable"
	"github.com/bulwark-go/bulwark/durable/queuetest"
	"github.com/bulwark-go/bulwark/redis/streamqueue"
)

// Environment of the crash test's child processes: the server and the
// queue's name.
const (
	addrEnv = "BULWARK_STREAMQUEUE_ADDR"
	nameEnv = "BULWARK_STREAMQUEUE_NAME"
)

// TestMain runs a crash-test child when asked to (see queuetest.Crash),
// else the tests, checking that none leaves a goroutine behind.
// IgnoreCurrent skips the goroutines ants' package init starts for its
// default pool.
func TestMain(m *testing.M) {
	if code, ok := queuetest.Child(openFromEnv); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// clientQueue is a Queue that closes its own client: for the crash test,
// which opens a queue per process.
type clientQueue struct {
	*streamqueue.Queue
	rdb *redis.Client
}

func (q clientQueue) Close() error {
	return errors.Join(q.Queue.Close(), q.rdb.Close())
}

// openFromEnv opens the queue the crash test's environment names, as a new
// consumer (the default consumer name holds the process ID), whose dead
// predecessors' entries are claimed after 300 ms.
func openFromEnv() (durable.Queue, error) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(addrEnv)})
	q, err := streamqueue.New(context.Background(), streamqueue.Config{Client: rdb, Name: os.Getenv(nameEnv), ClaimAfter: 300 * time.Millisecond})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return clientQueue{q, rdb}, nil
}
