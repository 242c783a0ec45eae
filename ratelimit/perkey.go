package ratelimit

import (
	"container/list"
	"context"
	"sync"
)

// Default of PerKeyConfig.
const DefaultMaxKeys = 10000

// PerKeyConfig configures a PerKey limiter.
type PerKeyConfig struct {
	// New returns the limiter of a key seen for the first time (or again
	// after its eviction), for instance a TokenBucket with the per-key
	// quota. Required.
	New func(key string) (Limiter, error)
	// MaxKeys is how many keys' limiters are kept; the least recently used
	// is evicted to make room. Default DefaultMaxKeys.
	MaxKeys int
}

// Validate reports the first invalid field of c; the error wraps
// ErrInvalidConfig.
func (c PerKeyConfig) Validate() error {
	switch {
	case c.New == nil:
		return invalid("PerKeyConfig.New must not be nil")
	case c.MaxKeys < 0:
		return invalid("PerKeyConfig.MaxKeys %d must not be negative", c.MaxKeys)
	}
	return nil
}

// PerKey gives each key (a caller, a tenant, an API key) its own limiter,
// made by New on the key's first call, and keeps at most MaxKeys of them,
// evicting the least recently used: a million distinct keys cost no more
// memory than MaxKeys limiters. An evicted key that comes back starts
// afresh with a new limiter (a full quota), so MaxKeys should exceed the
// number of keys active within one quota period; evictions are counted
// (Evictions) to tell.
type PerKey struct {
	mu        sync.Mutex
	newFn     func(string) (Limiter, error)
	max       int
	keys      map[string]*list.Element
	lru       list.List // of *keyed, most recent first
	evictions uint64
}

type keyed struct {
	key string
	lim Limiter
}

// NewPerKey returns an empty PerKey limiter, or an error wrapping
// ErrInvalidConfig.
func NewPerKey(c PerKeyConfig) (*PerKey, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	return &PerKey{newFn: c.New, max: c.MaxKeys, keys: make(map[string]*list.Element)}, nil
}

// AdmitKey asks key's limiter to admit the call (see Limiter.Admit). If New
// fails for a new key, AdmitKey returns its error, which does not match
// ErrLimited.
func (p *PerKey) AdmitKey(ctx context.Context, key string) error {
	lim, err := p.limiter(key)
	if err != nil {
		return err
	}
	return lim.Admit(ctx) // outside the lock: a Pacer may wait
}

// limiter returns key's limiter, creating it (and evicting the least
// recently used key if full) when needed.
func (p *PerKey) limiter(key string) (Limiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.keys[key]; ok {
		p.lru.MoveToFront(e)
		return e.Value.(*keyed).lim, nil
	}
	lim, err := p.newFn(key)
	if err != nil {
		return nil, err
	}
	if p.lru.Len() >= p.max {
		old := p.lru.Back()
		delete(p.keys, old.Value.(*keyed).key)
		p.lru.Remove(old)
		p.evictions++
	}
	p.keys[key] = p.lru.PushFront(&keyed{key: key, lim: lim})
	return lim, nil
}

// Len returns how many keys have a limiter now.
func (p *PerKey) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lru.Len()
}

// Evictions returns how many keys were evicted to make room since creation.
func (p *PerKey) Evictions() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evictions
}
