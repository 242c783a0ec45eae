package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
)

// bbolt trusts its file: it follows page ids and element offsets through
// its memory mapping without bounds checks, so a damaged page makes it
// panic, fault, or read memory outside the file. verifyFile walks the file
// first, reading it with bounds checks, and refuses what bbolt would
// stumble on. The layout is bbolt's file format, version 2 (frozen since
// 2014): a 16-byte page header (id, flags, element count, overflow pages),
// then the page's elements; two meta pages; a freelist page; a B+tree of
// branch and leaf pages per bucket, a bucket's header (root page id and
// sequence) being a leaf value, followed by the bucket's page when it is
// inline (root 0).
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeader       = 16
	elementSize      = 16 // branch and leaf elements alike
	branchPage       = 0x01
	leafPage         = 0x02
	freelistPage     = 0x10
	bucketLeaf       = 0x01
	bucketHeader     = 16
	noFreelist       = ^uint64(0)
	maxPageOverflows = 1 << 20 // a page of more than 4 GiB: damage
)

var native = binary.NativeEndian

// fileWalk is one verifyFile run.
type fileWalk struct {
	f        *os.File
	size     int64
	pageSize int64
	hw       uint64 // the high-water mark: pages 0..hw-1 are the file's
	seen     map[uint64]bool
}

// verifyFile checks the bbolt file f of size bytes (see fileWalk): its
// meta pages, that it is as long as they say, its freelist page, and
// every page of every bucket. The error says what is damaged.
func verifyFile(f *os.File, size int64) error {
	w := &fileWalk{f: f, size: size, seen: map[uint64]bool{}}
	root, freelist, err := w.meta()
	if err != nil {
		return err
	}
	if freelist != noFreelist {
		p, err := w.page(freelist)
		if err != nil {
			return fmt.Errorf("freelist: %w", err)
		}
		if native.Uint16(p[8:])&freelistPage == 0 {
			return fmt.Errorf("freelist page %d is not one", freelist)
		}
		n, first := uint64(native.Uint16(p[10:])), uint64(pageHeader)
		if n == 0xFFFF { // the count is the first element
			if len(p) < pageHeader+8 {
				return fmt.Errorf("freelist page %d is cut short", freelist)
			}
			n, first = native.Uint64(p[pageHeader:]), pageHeader+8
		}
		if n > (uint64(len(p))-first)/8 {
			return fmt.Errorf("freelist page %d lists %d ids, more than it holds", freelist, n)
		}
		for i := range n {
			if id := native.Uint64(p[first+8*i:]); id < 2 || id >= w.hw {
				return fmt.Errorf("freelist page %d lists page %d, outside 2..%d", freelist, id, w.hw-1)
			}
		}
	}
	return w.tree(root, nil)
}

// meta reads both meta pages, picks the valid one of the later
// transaction (as bbolt does), checks the file's length against it, and
// returns its root page and freelist page.
func (w *fileWalk) meta() (root, freelist uint64, err error) {
	var best []byte
	for _, off := range []int64{0, -1} {
		if off < 0 {
			if best == nil {
				off = int64(os.Getpagesize())
			} else {
				off = int64(native.Uint32(best[24:]))
			}
		}
		m := make([]byte, 80)
		if _, err := w.f.ReadAt(m, off); err != nil {
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write(m[16:72])
		valid := native.Uint32(m[16:]) == boltMagic && native.Uint32(m[20:]) == boltVersion && native.Uint64(m[72:]) == h.Sum64()
		if valid && (best == nil || native.Uint64(m[64:]) > native.Uint64(best[64:])) {
			best = m
		}
	}
	if best == nil {
		return 0, 0, errors.New("no valid meta page")
	}
	w.pageSize, w.hw = int64(native.Uint32(best[24:])), native.Uint64(best[56:])
	if w.pageSize < 512 || w.hw < 2 {
		return 0, 0, fmt.Errorf("meta page gives page size %d and %d pages", w.pageSize, w.hw)
	}
	if need := int64(w.hw) * w.pageSize; w.size < need || need/w.pageSize != int64(w.hw) {
		return 0, 0, fmt.Errorf("truncated: %d bytes, its pages need %d", w.size, int64(w.hw)*w.pageSize)
	}
	return native.Uint64(best[32:]), native.Uint64(best[48:]), nil
}

// page reads page id, with its overflow pages, after checking that it is
// one of the file's and reached once.
func (w *fileWalk) page(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hw {
		return nil, fmt.Errorf("page id %d outside 2..%d", id, w.hw-1)
	}
	if w.seen[id] {
		return nil, fmt.Errorf("page %d reached twice", id)
	}
	w.seen[id] = true
	head := make([]byte, pageHeader)
	if _, err := w.f.ReadAt(head, int64(id)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	over := uint64(native.Uint32(head[12:]))
	switch {
	case native.Uint64(head) != id:
		return nil, fmt.Errorf("page %d says it is page %d", id, native.Uint64(head))
	case over >= maxPageOverflows || id+over >= w.hw:
		return nil, fmt.Errorf("page %d runs %d pages past the end", id, over)
	}
	p := make([]byte, (int64(over)+1)*w.pageSize)
	if _, err := w.f.ReadAt(p, int64(id)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return p, nil
}

// tree checks the bucket tree whose root is page id, or, with inline set,
// the inline page it holds.
func (w *fileWalk) tree(id uint64, inline []byte) error {
	p := inline
	if p == nil {
		var err error
		if p, err = w.page(id); err != nil {
			return err
		}
	}
	if len(p) < pageHeader {
		return fmt.Errorf("inline page of %d bytes", len(p))
	}
	flags, n := native.Uint16(p[8:]), int(native.Uint16(p[10:]))
	if pageHeader+n*elementSize > len(p) {
		return fmt.Errorf("page %d holds %d elements, more than fit", id, n)
	}
	for i := range n {
		at := pageHeader + i*elementSize
		e := p[at : at+elementSize]
		switch {
		case flags&branchPage != 0:
			if err := span(id, p, at, native.Uint32(e), native.Uint32(e[4:]), 0); err != nil {
				return err
			}
			if err := w.tree(native.Uint64(e[8:]), nil); err != nil {
				return err
			}
		case flags&leafPage != 0:
			pos, ksize, vsize := native.Uint32(e[4:]), native.Uint32(e[8:]), native.Uint32(e[12:])
			if err := span(id, p, at, pos, ksize, vsize); err != nil {
				return err
			}
			if native.Uint32(e)&bucketLeaf == 0 {
				continue
			}
			v := p[at+int(pos)+int(ksize) : at+int(pos)+int(ksize)+int(vsize)]
			if len(v) < bucketHeader {
				return fmt.Errorf("page %d: a bucket header of %d bytes", id, len(v))
			}
			var err error
			if root := native.Uint64(v); root == 0 {
				err = w.tree(0, v[bucketHeader:])
			} else {
				err = w.tree(root, nil)
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("page %d is neither a branch nor a leaf (flags %#x)", id, flags)
		}
	}
	return nil
}

// span checks that the key (and value) of the element at offset at of
// page p, pos bytes after it, lies within the page.
func span(id uint64, p []byte, at int, pos, ksize, vsize uint32) error {
	if end := uint64(at) + uint64(pos) + uint64(ksize) + uint64(vsize); end > uint64(len(p)) {
		return fmt.Errorf("page %d: an element runs past the page, to byte %d of %d", id, end, len(p))
	}
	return nil
}
