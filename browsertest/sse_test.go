package browsertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/bulwark-go/bulwark/dashboard"
)

// TestBrowserReadsAnyServerSentEvents: the page reads the stream itself
// (not with EventSource), and reads it as EventSource would: lines ending
// in CRLF, CR or LF, an event's data over several data lines, comments and
// fields other than data ignored, and the stream cut into writes anywhere,
// even between a CR and its LF. Each command below arrives one of these
// ways and must show its successes.
func TestBrowserReadsAnyServerSentEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	tp := realTemplates(t)
	now := time.Now()
	data := func(name string, success int64) (string, string) {
		evs := tp.commandEvents(t, now, synthCmd{group: "sse", name: name, strategy: "SEMAPHORE", success: success})
		h, err := json.Marshal(evs[0])
		require.NoError(t, err)
		n, err := json.Marshal(evs[1])
		require.NoError(t, err)
		return string(h), string(n)
	}
	var writes []string
	event := func(name string, success int64, eol string) {
		h, n := data(name, success)
		writes = append(writes, "data: "+h+eol+eol+"data:"+n+eol+eol)
	}
	event("LF", 1, "\n")
	event("CRLF", 2, "\r\n")
	event("CR", 3, "\r")
	// One event over two data lines (joined by "\n", which JSON allows
	// between tokens), after a comment and fields that are not data.
	h, n := data("Lines", 4)
	i := strings.Index(h, `"name"`)
	writes = append(writes, ": a comment\nid: 7\nretry: 1000\nevent-less: x\ndata: "+h[:i]+"\ndata: "+h[i:]+"\n\n", "data: "+n+"\n\n")
	// An event cut mid-line, and between the CR and the LF of a CRLF.
	h, n = data("Cut", 5)
	writes = append(writes, "data: "+h[:40], h[40:]+"\r", "\n\r\n", "data: "+n+"\r\n\r\n", "ping: \r\n\r\n")

	page, err := dashboard.NewPage(dashboard.PageConfig{StreamURL: dashboard.StreamPath[1:]})
	require.NoError(t, err)
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/", page)
	mux.HandleFunc(dashboard.StreamPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream;charset=UTF-8")
		for _, s := range writes {
			if _, err := w.Write([]byte(s)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(30 * time.Millisecond) // apart: the page gets them as pieces
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	defer close(done)

	ctx := startChromium(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/?sort=name")))
	for name, want := range map[string]string{"LF": "1", "CRLF": "2", "CR": "3", "Lines": "4", "Cut": "5"} {
		waitFor(t, 10*time.Second, name, want, tileCounter(ctx, name, "success"))
	}
	waitFor(t, 5*time.Second, "commands", "5 of 5", evalString(ctx, `document.getElementById('cmd-count').textContent`))
}
