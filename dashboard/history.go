package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"
)

// TypeBulwarkHistory is the event type of a command's recent history, sent
// to each new stream client before its first frame.
const TypeBulwarkHistory = "BulwarkHistory"

// historyPoint is one step of a command's history: its request rate and
// error rate (per second, over the metrics window) at epoch-ms t.
type historyPoint struct {
	t          int64
	rate, errs float64
}

// series is one command's history: a ring of the newest points, one per
// step at most.
type series struct {
	group, name string
	points      []historyPoint // ring, len <= cap
	next        int            // where the next point goes once the ring is full
}

func (s *series) newest() historyPoint {
	if len(s.points) < cap(s.points) {
		return s.points[len(s.points)-1]
	}
	return s.points[(s.next+len(s.points)-1)%len(s.points)]
}

// ordered calls f for each point, oldest first.
func (s *series) ordered(f func(historyPoint)) {
	if len(s.points) < cap(s.points) {
		for _, p := range s.points {
			f(p)
		}
		return
	}
	for i := range s.points {
		f(s.points[(s.next+i)%len(s.points)])
	}
}

// history keeps, per command, one point per step over the last span: a
// fixed ring of span/step points each, so its memory is bounded by the
// number of commands; a command not seen for a whole span is forgotten.
// It is safe for concurrent use.
type history struct {
	step int64 // ms
	size int   // points per command

	mu     sync.Mutex
	series map[string]*series
}

func newHistory(span, step time.Duration) *history {
	return &history{
		step:   step.Milliseconds(),
		size:   int(span / step),
		series: make(map[string]*series),
	}
}

// add records a point for command name of group at epoch-ms now, unless the
// command has a point less than a step old.
func (h *history) add(now int64, group, name string, rate, errs float64) {
	key := group + "\x00" + name
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[key]
	if s == nil {
		s = &series{group: group, name: name, points: make([]historyPoint, 0, h.size)}
		h.series[key] = s
	} else if now-s.newest().t < h.step {
		return
	}
	p := historyPoint{t: now, rate: rate, errs: errs}
	if len(s.points) < cap(s.points) {
		s.points = append(s.points, p)
		return
	}
	s.points[s.next] = p
	s.next = (s.next + 1) % len(s.points)
}

// historyEvent is the BulwarkHistory event: points are [epoch ms, requests/s,
// errors/s], oldest first.
type historyEvent struct {
	Type   string       `json:"type"`
	Name   string       `json:"name"`
	Group  string       `json:"group"`
	StepMs int64        `json:"stepMs"`
	Points [][3]float64 `json:"points"`
}

// frame encodes one BulwarkHistory event per command seen within the span
// before now (epoch ms), and forgets the others. It returns nil when there
// is no history.
func (h *history) frame(now int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	ev := historyEvent{Type: TypeBulwarkHistory, StepMs: h.step}
	for key, s := range h.series {
		if now-s.newest().t > int64(h.size)*h.step {
			delete(h.series, key)
			continue
		}
		ev.Group, ev.Name = s.group, s.name
		ev.Points = ev.Points[:0]
		s.ordered(func(p historyPoint) {
			ev.Points = append(ev.Points, [3]float64{float64(p.t), round3(p.rate), round3(p.errs)})
		})
		buf.Write(dataPrefix)
		_ = enc.Encode(&ev) // plain strings and finite numbers: cannot fail
		buf.WriteByte('\n')
	}
	if buf.Len() == 0 {
		return nil
	}
	return buf.Bytes()
}

// rates returns the request rate and error rate per second that a
// HystrixCommand event shows, as the page computes them: every call in the
// window (refused ones included), and its failures, timeouts, rejections
// and short circuits, over the window's length.
func rates(e *hystrixCommand) (rate, errs float64) {
	secs := float64(e.MetricsRollingStatisticalWindowInMillis) / 1000
	if secs <= 0 {
		return 0, 0
	}
	refused := e.RollingCountShortCircuited + e.RollingCountThreadPoolRejected + e.RollingCountSemaphoreRejected
	volume := e.RollingCountSuccess + e.RollingCountFailure + e.RollingCountTimeout + e.RollingCountBadRequests + refused
	errors := e.RollingCountFailure + e.RollingCountTimeout + refused
	return float64(volume) / secs, float64(errors) / secs
}

func round3(x float64) float64 { return math.Round(finite(x)*1e3) / 1e3 }

// KeepHistory records the history every HistoryStep until ctx ends, even
// while no client watches, so that the first client after a quiet time
// gets a full history too; it returns ctx.Err(). Run it on a goroutine of
// its own for the life of the stream. A frame that cannot be built (a
// Source that panics) records nothing for that step.
func (s *Stream) KeepHistory(ctx context.Context) error {
	t := time.NewTicker(s.cfg.HistoryStep)
	defer t.Stop()
	enc := encoder{hist: s.hist}
	size := 0
	for {
		if data, err := s.safeFrame(&enc, size); err == nil {
			size = len(data)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// safeFrame builds one frame with enc (which records its history points),
// turning a panic in the Source's Snapshot or in the encoder into an error
// carrying its value and stack.
func (s *Stream) safeFrame(enc *encoder, sizeHint int) (data []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("dashboard: stream frame panicked: %v\n%s", v, debug.Stack())
		}
	}()
	return s.frames(enc, sizeHint)
}
