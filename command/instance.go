package command

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// maxWarmInstances bounds the instances a group remembers for
// GroupConfig.InstanceWarmUp. Once it knows that many, a call to an
// instance it has never seen is counted by the breakers at once (no
// warm-up), and the first such call is logged at Warn level.
const maxWarmInstances = 1024

// WithInstance names the instance of the dependency the call goes to (a
// host, a pod, a replica): in a group with GroupConfig.InstanceWarmUp, the
// breakers do not count the outcomes of calls to an instance during its
// first InstanceWarmUp, counted from the group's first call to it. An
// empty name is no instance (always counted). Without InstanceWarmUp the
// name is not read.
func WithInstance(name string) Option { return Option{instance: name} }

// instanceOf returns the call's instance (WithInstance; the last one
// given), or "".
func instanceOf(opts []Option) string {
	var name string
	for _, o := range opts {
		if o.instance != "" {
			name = o.instance
		}
	}
	return name
}

// instances remembers when a group first called each instance, for
// InstanceWarmUp. Its zero value is ready; it is safe for concurrent use.
type instances struct {
	first  sync.Map     // instance name → time.Duration, group clock of its first call
	n      atomic.Int64 // entries in first
	mu     sync.Mutex   // serialises additions, so n never passes maxWarmInstances
	capped atomic.Bool  // the overflow has been logged
}

// cold reports whether instance, called at now, is still in its first d:
// the first call to an unknown instance starts its warm-up. Once
// maxWarmInstances are known, an unknown instance is not cold, and the
// first time is logged on g's logger.
func (in *instances) cold(g *Group, instance string, now, d time.Duration) bool {
	if instance == "" {
		return false
	}
	t, ok := in.first.Load(instance)
	if !ok {
		in.mu.Lock()
		if t, ok = in.first.Load(instance); !ok {
			if in.n.Load() >= maxWarmInstances {
				in.mu.Unlock()
				if !in.capped.Swap(true) {
					g.logger.Warn("bulwark: instance limit reached: new instances get no warm-up",
						slog.String("group", g.name), slog.Int("max_instances", maxWarmInstances),
						slog.String("instance", instance))
				}
				return false
			}
			t = now
			in.first.Store(instance, now)
			in.n.Add(1)
		}
		in.mu.Unlock()
	}
	return now-t.(time.Duration) < d
}
