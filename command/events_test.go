package command

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/circuit"
	"github.com/bulwark-go/bulwark/internal/eventdoc"
	"github.com/bulwark-go/bulwark/metrics"
)

// eventConsts returns the names of metrics' Event constants, in the order
// of their values, read from the source.
func eventConsts(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "../metrics/event.go", nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || len(g.Specs) == 0 {
			continue
		}
		if first := g.Specs[0].(*ast.ValueSpec); first.Type == nil || first.Type.(*ast.Ident).Name != "Event" {
			continue
		}
		var names []string
		for _, s := range g.Specs {
			names = append(names, s.(*ast.ValueSpec).Names[0].Name)
		}
		return names[:metrics.NumEvents] // NumEvents ends the block
	}
	t.Fatal("no Event constants in metrics/event.go")
	return nil
}

// counted reports whether a closed breaker counts a call recorded as e.
func counted(t *testing.T, e metrics.Event) bool {
	b, err := circuit.New(circuit.Config{Clock: new(metrics.ManualClock), Logger: discardLogger})
	require.NoError(t, err)
	p, err := b.Allow()
	require.NoError(t, err)
	p.Record(e, time.Millisecond)
	return b.Snapshot().Health.Requests == 1
}

// isPrimary reports whether e is a primary outcome: one that
// metrics.Counts.Attempts counts.
func isPrimary(e metrics.Event) bool {
	var c metrics.Counts
	c[e] = 1
	return c.Attempts() == 1
}

// docs/events.md lists every event once, in order, with its texts as the
// code writes them, and says truly which are primary outcomes, which the
// breakers count and which fall back.
func TestEventsTable(t *testing.T) {
	rows, err := eventdoc.Read("../docs/events.md")
	require.NoError(t, err)
	consts := eventConsts(t)
	require.Len(t, rows, int(metrics.NumEvents), "one row per event")
	for e := range metrics.NumEvents {
		r := rows[e]
		assert.Equal(t, consts[e], r.Const, "event %d", e)
		assert.Equal(t, e.String(), r.Text, r.Const)
		assert.Equal(t, e.Label(), r.Label, r.Const)
		assert.Equal(t, isPrimary(e), r.Primary, "%s: primary", r.Const)
		assert.Equal(t, fallsBack(e), r.FallsBack, "%s: falls back", r.Const)
		assert.Equal(t, counted(t, e), r.Counted, "%s: the breaker counts it", r.Const)
	}
	var primaries []metrics.Event
	for e := range metrics.NumEvents {
		if isPrimary(e) {
			primaries = append(primaries, e)
		}
	}
	assert.Equal(t, primaries, []metrics.Event{metrics.Success, metrics.Failure, metrics.Timeout, metrics.BadRequest,
		metrics.ShortCircuited, metrics.ThreadPoolRejected, metrics.SemaphoreRejected, metrics.Cancelled, metrics.QueueTimeout,
		metrics.RateLimited, metrics.ReadOnly, metrics.Coalesced, metrics.Throttled, metrics.PriorityRejected}, "the primary outcomes, as Info.Event lists them")
}
