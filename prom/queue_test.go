package prom

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQueueCollectorExportsEveryQueue: each group's figures, under the
// documented names and types, through the text exposition and its parser.
func TestQueueCollectorExportsEveryQueue(t *testing.T) {
	q, err := NewQueues(func() []QueueStats {
		return []QueueStats{
			{Group: "orders", Backlog: 12, OldestAge: 1500 * time.Millisecond, Replayed: 40, DeadLettered: 2, DeadLetters: 1, Outages: 7, Resets: 1},
			{Group: "mail", Err: errors.New("redis down")},
		}
	})
	require.NoError(t, err)
	fams := scrape(t, q)
	orders := []string{"group", "orders"}
	assert.Equal(t, 12.0, value(t, fams, "bulwark_queue_backlog", orders...))
	assert.Equal(t, 1.5, value(t, fams, "bulwark_queue_oldest_age_seconds", orders...))
	assert.Equal(t, 40.0, value(t, fams, "bulwark_queue_replayed_total", orders...))
	assert.Equal(t, 2.0, value(t, fams, "bulwark_queue_dead_lettered_total", orders...))
	assert.Equal(t, 1.0, value(t, fams, "bulwark_queue_dead_letters", orders...))
	assert.Equal(t, 7.0, value(t, fams, "bulwark_queue_outages_total", orders...))
	assert.Equal(t, 1.0, value(t, fams, "bulwark_queue_resets_total", orders...))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_queue_stats_error", orders...))
	assert.Equal(t, 1.0, value(t, fams, "bulwark_queue_stats_error", "group", "mail"))
	assert.Equal(t, 0.0, value(t, fams, "bulwark_queue_backlog", "group", "mail"))
	assert.Equal(t, dto.MetricType_COUNTER, fams["bulwark_queue_replayed_total"].GetType())
	assert.Equal(t, dto.MetricType_COUNTER, fams["bulwark_queue_dead_lettered_total"].GetType())
	assert.Equal(t, dto.MetricType_GAUGE, fams["bulwark_queue_backlog"].GetType())
	assert.Equal(t, 0.0, value(t, fams, "bulwark_queue_dropped_series_total"))
	assert.Len(t, fams, len(queueDescs)+1)
}

// TestQueueCollectorRejectsAGroupListedTwice: the scrape fails with an
// error naming the group, rather than exporting one of two figures.
func TestQueueCollectorRejectsAGroupListedTwice(t *testing.T) {
	q, err := NewQueues(func() []QueueStats { return []QueueStats{{Group: "orders"}, {Group: "orders", Backlog: 1}} })
	require.NoError(t, err)
	pr := prometheus.NewPedanticRegistry()
	require.NoError(t, pr.Register(q))
	_, err = pr.Gather()
	require.ErrorContains(t, err, `queue group "orders" is listed twice`)
}

// TestQueueCollectorWithoutQueues: no queue, no queue series (and no
// error): only the dropped-series counter.
func TestQueueCollectorWithoutQueues(t *testing.T) {
	q, err := NewQueues(func() []QueueStats { return nil })
	require.NoError(t, err)
	fams := scrape(t, q)
	assert.Len(t, fams, 1)
	assert.Equal(t, 0.0, value(t, fams, "bulwark_queue_dropped_series_total"))
}

func TestNewQueuesRejectsNilFunction(t *testing.T) {
	_, err := NewQueues(nil)
	require.ErrorIs(t, err, ErrNilSource)
}

// TestQueueCollectorInvalidUTF8GroupDoesNotBreakTheScrape: a group name
// that is not valid UTF-8 (QueueStats is filled by the user's function) is
// left out and counted; the other queues are still scraped.
func TestQueueCollectorInvalidUTF8GroupDoesNotBreakTheScrape(t *testing.T) {
	q, err := NewQueues(func() []QueueStats {
		return []QueueStats{{Group: "caf\xe9", Backlog: 3}, {Group: "orders", Backlog: 12}}
	})
	require.NoError(t, err)
	fams := scrape(t, q)
	assert.Equal(t, 12.0, value(t, fams, "bulwark_queue_backlog", "group", "orders"))
	assert.Len(t, fams["bulwark_queue_backlog"].GetMetric(), 1)
	assert.Equal(t, float64(len(queueDescs)), value(t, fams, "bulwark_queue_dropped_series_total"))
}
