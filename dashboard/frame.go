package dashboard

import (
	"reflect"
	"slices"

	"github.com/bulwark-go/bulwark/command"
)

// Stream framing: each event is "data: " + compact JSON + a blank line, with
// no event name, then a ping comment-like field that EventSource ignores.
var (
	dataPrefix = []byte("data: ")
	ping       = []byte("ping: \n\n")
)

// The plans of the four event types (see json.go), built once.
var (
	hystrixCommandPlan    = newPlan(reflect.TypeFor[hystrixCommand]())
	hystrixThreadPoolPlan = newPlan(reflect.TypeFor[hystrixThreadPool]())
	bulwarkCommandPlan    = newPlan(reflect.TypeFor[bulwarkCommand]())
	bulwarkGroupPlan      = newPlan(reflect.TypeFor[bulwarkGroup]())
)

// encoder turns snapshots into frames. It keeps one event value of each kind
// and reuses them (and their transition slices) from frame to frame; each
// hub owns one, so it needs no lock.
type encoder struct {
	hc hystrixCommand
	hp hystrixThreadPool
	bc bulwarkCommand
	bg bulwarkGroup

	hist *history // records each command's rates; nil records nothing
}

// encode writes every event of snap, in Hystrix's order (all commands, then
// all thread pools), then bulwark's own events (commands, then groups), then
// the ping. sizeHint is the previous frame's length.
func (e *encoder) encode(snap command.Snapshot, sizeHint int) ([]byte, error) {
	buf := make([]byte, 0, sizeHint+sizeHint/8+len(ping))
	event := func(p *plan, v any) (err error) {
		if cap(buf)-len(buf) < 4<<10 {
			buf = slices.Grow(buf, cap(buf)) // doubling, where append grows a large slice by a quarter
		}
		buf = append(buf, dataPrefix...)
		if buf, err = p.append(buf, reflect.ValueOf(v).Elem()); err != nil {
			return err
		}
		buf = append(buf, '\n', '\n')
		return nil
	}
	now := snap.Time.UnixMilli()
	gs := snap.Groups
	for i := range gs {
		for j := range gs[i].Commands {
			e.hc.fill(now, &gs[i], &gs[i].Commands[j])
			if e.hist != nil {
				rate, errs := rates(&e.hc)
				e.hist.add(now, e.hc.Group, e.hc.Name, rate, errs)
			}
			if err := event(hystrixCommandPlan, &e.hc); err != nil {
				return nil, err
			}
		}
	}
	for i := range gs {
		if !isPool(&gs[i]) {
			continue
		}
		e.hp.fill(now, &gs[i])
		if err := event(hystrixThreadPoolPlan, &e.hp); err != nil {
			return nil, err
		}
	}
	for i := range gs {
		for j := range gs[i].Commands {
			e.bc.fill(now, &gs[i], &gs[i].Commands[j])
			if err := event(bulwarkCommandPlan, &e.bc); err != nil {
				return nil, err
			}
		}
	}
	for i := range gs {
		e.bg.fill(now, &gs[i])
		if err := event(bulwarkGroupPlan, &e.bg); err != nil {
			return nil, err
		}
	}
	return append(buf, ping...), nil
}
