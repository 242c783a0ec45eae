package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/command"
)

// heapInUse returns the live heap after two collections (the second frees
// what sync.Pools kept through the first).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// hostileEvents returns the events of one frame of a hostile instance:
// n keys, each with an event of one of the merged types whose every string
// is long (the names command.MaxNameLength bytes, the texts 300), with
// padding bytes of a field nobody merges and, for the native ones,
// transitions breaker transitions; then an event of a type nobody merges;
// and last an event whose name is too long to keep.
func hostileEvents(n, padding, transitions int) [][]byte {
	text := strings.Repeat("é", 150)
	junk := strings.Repeat("j", padding)
	tr := map[string]any{"from": text, "to": text, "reason": text, "at": 1, "requests": 2}
	trs := make([]any, transitions)
	for i := range trs {
		trs[i] = tr
	}
	name := func(i int) string { return fmt.Sprintf("%0*d", command.MaxNameLength, i) }
	var out [][]byte
	add := func(ev map[string]any) {
		ev["junk"] = junk
		b, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	for i := range n {
		switch i % 4 {
		case 0:
			add(map[string]any{"type": TypeHystrixCommand, "name": name(i), "group": name(0), "threadPool": name(0),
				"propertyValue_executionIsolationStrategy": text, "rollingCountSuccess": 1})
		case 1:
			add(map[string]any{"type": TypeHystrixThreadPool, "name": name(i), "currentActiveCount": 1})
		case 2:
			add(map[string]any{"type": TypeBulwarkCommand, "name": name(i), "group": name(0), "state": text, "reason": text,
				"shared": text, "healthCheck": text, "groupState": text, "alertTier": text, "transitions": trs})
		case 3:
			add(map[string]any{"type": TypeBulwarkGroup, "name": name(i), "strategy": text, "reason": text, "transitions": trs})
		}
		add(map[string]any{"type": "SomethingElse", "name": name(i)})
	}
	add(map[string]any{"type": TypeHystrixCommand, "name": strings.Repeat("n", command.MaxNameLength+1), "group": "g"})
	return out
}

// TestDecodedEventsAreBounded: a decoded event keeps only what the merge
// uses, bounded, whatever its line holds: within maxKeyMemory, with its
// key, for the worst events an instance can send (and it logs what the
// events of a bulwark stream cost).
func TestDecodedEventsAreBounded(t *testing.T) {
	const n = 2000
	lines := hostileEvents(4, 1<<10, 20)
	var e encoder
	frame, err := e.encode(sampleSnapshot(), 0)
	require.NoError(t, err)
	var bulwarks [][]byte // the events a bulwark stream sends
	for _, l := range bytes.Split(frame, []byte("\n")) {
		if data, ok := bytes.CutPrefix(l, dataPrefix); ok {
			bulwarks = append(bulwarks, data)
		}
	}
	require.NotEmpty(t, bulwarks)
	for _, data := range append(lines[:8:8], bulwarks...) {
		ev, err := decodeEvent(data)
		require.NoError(t, err)
		if ev == nil {
			continue // a type nobody merges
		}
		keep := make([]upEvent, n)
		keys := make([]string, n)
		before := heapInUse()
		for i := range keep {
			keep[i], err = decodeEvent(data)
			require.NoError(t, err)
			keys[i] = strings.Clone(keep[i].key())
		}
		each := (heapInUse() - before) / n
		t.Logf("%T from a line of %d bytes: %d bytes kept", ev, len(data), each)
		assert.Less(t, each, int64(maxKeyMemory), "%T", ev)
		runtime.KeepAlive(keep)
		runtime.KeepAlive(keys)
	}
	_, err = decodeEvent(lines[len(lines)-1])
	assert.ErrorIs(t, err, errLongName)

	var ts transitions
	require.NoError(t, json.Unmarshal([]byte(`[{"at":1},{"at":2},{"at":3},{"at":4},{"at":5},{"at":6},{"at":7},{"at":8},{"at":9},{"at":10}]`), &ts))
	require.Len(t, ts, maxTransitions)
	assert.Equal(t, int64(3), ts[0].At, "the newest, oldest first")
	assert.Equal(t, int64(10), ts[maxTransitions-1].At)
}

// TestAggregateRetainsOnlyWhatItMerges: the aggregate kept every field of
// every event and forwarded it (one instance sending 39 MiB left 92 MiB
// retained, copied into every viewer's frames; the stated per-instance
// bound was MaxEvents × MaxEventBytes, 10 GiB at the defaults). Against an
// instance that sends two frames of 200 keys, each line padded to about
// 128 KiB with fields nobody merges (26 MiB a frame), the heap the
// aggregate retains stays within the stated bound, MaxEventBytes +
// 2 × MaxEvents × maxKeyMemory (with room for the rest of the process),
// and the merged frame carries none of the padding.
func TestAggregateRetainsOnlyWhatItMerges(t *testing.T) {
	const keys, padding = 200, 128 << 10
	served := make(chan struct{})
	var once sync.Once
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 2 {
			for _, l := range hostileEvents(keys, padding, 100) { // made anew: the test keeps none of it
				fmt.Fprintf(w, "data: %s\n\n", l)
			}
			fmt.Fprint(w, "ping: \n\n")
			w.(http.Flusher).Flush()
		}
		once.Do(func() { close(served) })
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
				fmt.Fprint(w, "ping: \n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer hostile.Close()

	before := heapInUse()
	cfg := AggregateConfig{Instances: []string{hostile.URL + StreamPath}, MaxEvents: keys, MaxEventBytes: 256 << 10,
		StaleAfter: time.Minute, Stream: Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog}}
	agg, err := NewAggregate(cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, agg.Close(context.Background())) }()
	select {
	case <-served:
	case <-time.After(time.Minute):
		t.Fatal("the hostile instance did not send its frames within a minute")
	}
	up := agg.upstreams[cfg.Instances[0]]
	require.Eventually(t, func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return len(up.events) == keys
	}, time.Minute, 10*time.Millisecond, "every key stored")
	retained := heapInUse() - before
	bound := int64(cfg.MaxEventBytes + 2*cfg.MaxEvents*maxKeyMemory)
	t.Logf("%d keys, %d MiB sent in each frame: %d KiB retained (stated bound %d KiB)", keys, keys*2*padding>>20, retained>>10, bound>>10)
	assert.Less(t, retained, 2*bound+4<<20, "retained heap within the bound (twice it, and 4 MiB for the rest)")

	ts := httptest.NewServer(agg)
	defer ts.Close()
	c := openStream(t, newTestClient(), ts.URL+StreamPath)
	defer c.Close()
	f, err := c.sse.frame()
	require.NoError(t, err)
	var frame bytes.Buffer
	merged := 0
	for _, e := range f.events {
		if e["type"] == TypeBulwarkHistory {
			continue
		}
		merged++
		b, err := json.Marshal(e)
		require.NoError(t, err)
		frame.Write(b)
		assert.NotContains(t, e, "junk")
	}
	assert.Equal(t, keys, merged, "one merged event per key; no other type, no over-long name")
	assert.Less(t, frame.Len(), keys*maxKeyMemory, "the merged frame")
}

// TestAggregateKeepsInvalidUTF8NamesApart: two command names that are not
// valid UTF-8 went out on the stream as the same JSON string (each invalid
// byte becomes U+FFFD), so the aggregate merged two commands into one. The
// registry renames them apart, and the aggregate shows both.
func TestAggregateKeepsInvalidUTF8NamesApart(t *testing.T) {
	in := startInstance(t)
	for i, name := range []string{"caf\xe9", "caf\xe8"} {
		for range i + 1 {
			_, err := command.Execute(context.Background(), in.api, command.Func(name, func(context.Context) (int, error) { return 1, nil }, nil))
			require.NoError(t, err)
		}
	}
	agg, err := NewAggregate(AggregateConfig{Instances: []string{in.url()},
		Stream: Config{Interval: 50 * time.Millisecond, MinInterval: 10 * time.Millisecond, Logger: quietLog}})
	require.NoError(t, err)
	defer func() { require.NoError(t, agg.Close(context.Background())) }()
	ts := httptest.NewServer(agg)
	defer ts.Close()
	c := openStream(t, newTestClient(), ts.URL+StreamPath)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := c.sse.frame()
		require.NoError(t, err)
		cmds := f.ofType(TypeHystrixCommand)
		if len(cmds) == 0 {
			continue
		}
		successes := map[string]int64{}
		for _, e := range cmds {
			successes[e["name"].(string)] = number(t, e, "rollingCountSuccess")
		}
		require.Len(t, successes, 2, "two commands: %v", successes)
		var got []int64
		for _, n := range successes {
			got = append(got, n)
		}
		assert.ElementsMatch(t, []int64{1, 2}, got)
		return
	}
	t.Fatal("no merged frame with commands within 10 s")
}
