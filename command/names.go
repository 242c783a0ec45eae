package command

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sync/atomic"
)

// nameIndex holds the commands of a group by name. It only grows (a group
// never forgets a command name), so it is an append-only hash table that
// a lookup reads without a lock, and that doubles its slots when half of
// them are taken: adding n names costs O(n) in all, where a copy-on-write
// map cost O(n) for each new name (0.23 s for 1,000 names, 5.2 s for
// 10,000). Only the holder of the group's lock adds.
//
// A command is published by an atomic store of its slot after it was
// built, so a reader that finds it sees it whole; a reader still holding
// the slots from before a doubling may miss a name added since, and then
// takes the group's lock to add it, where it finds it.
type nameIndex struct {
	slots atomic.Pointer[nameSlots]
	list  atomic.Pointer[[]*commandState] // in order of creation; each append publishes a longer slice
	// sorted caches list sorted by name, for snapshots; stale when shorter
	// than list.
	sorted atomic.Pointer[[]*commandState]
}

// nameSlots is one generation of an index's open-addressed table.
type nameSlots struct {
	seed maphash.Seed
	mask uint64 // len(s) - 1; len(s) is a power of two
	s    []atomic.Pointer[commandState]
}

// minNameSlots is the size of a new index's table.
const minNameSlots = 8

func newNameIndex() *nameIndex {
	x := &nameIndex{}
	x.slots.Store(newNameSlots(minNameSlots))
	x.list.Store(new([]*commandState))
	return x
}

func newNameSlots(n int) *nameSlots {
	return &nameSlots{seed: maphash.MakeSeed(), mask: uint64(n - 1), s: make([]atomic.Pointer[commandState], n)}
}

// get returns the command named key, or nil. It neither locks nor
// allocates.
func (x *nameIndex) get(key string) *commandState {
	t := x.slots.Load()
	for i := maphash.String(t.seed, key) & t.mask; ; i = (i + 1) & t.mask {
		c := t.s[i].Load()
		if c == nil || c.name == key {
			return c
		}
	}
}

// add adds c under its name, which the index must not hold yet. The
// group's lock must be held.
func (x *nameIndex) add(c *commandState) {
	list := append(*x.list.Load(), c)
	t := x.slots.Load()
	if uint64(len(list))*2 > uint64(len(t.s)) {
		t = newNameSlots(2 * len(t.s))
		for _, old := range list[:len(list)-1] {
			t.put(old)
		}
		t.put(c)
		x.slots.Store(t)
	} else {
		t.put(c)
	}
	x.list.Store(&list)
}

// put stores c in the first free slot of its probe sequence.
func (t *nameSlots) put(c *commandState) {
	i := maphash.String(t.seed, c.name) & t.mask
	for t.s[i].Load() != nil {
		i = (i + 1) & t.mask
	}
	t.s[i].Store(c)
}

// len returns the number of names.
func (x *nameIndex) len() int { return len(*x.list.Load()) }

// all returns the commands in order of creation. The slice must not be
// modified.
func (x *nameIndex) all() []*commandState { return *x.list.Load() }

// byNameOrder returns the commands sorted by name. The slice must not be
// modified. It sorts only when names were added since the last call.
func (x *nameIndex) byNameOrder() []*commandState {
	list := x.all()
	if s := x.sorted.Load(); s != nil && len(*s) == len(list) {
		return *s
	}
	s := slices.SortedFunc(slices.Values(list), func(a, b *commandState) int { return cmp.Compare(a.name, b.name) })
	x.sorted.Store(&s)
	return s
}
