package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/bulwark-go/bulwark/dashboard"
)

// TestMain fails the run if the demo leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// demo is the demo program running in the test.
type demo struct {
	url  string // http://127.0.0.1:port/
	stop context.CancelFunc
	done chan error
}

var urlLine = regexp.MustCompile(`bulwark dashboard: (http://\S+/) `)

// startDemo runs the program with args (plus -addr 127.0.0.1:0 -quiet) and
// waits for the URL it prints.
func startDemo(t *testing.T, args ...string) *demo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	d := &demo{stop: cancel, done: make(chan error, 1)}
	go func() {
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0", "-quiet"}, args...), pw)
		pw.CloseWithError(io.EOF)
		d.done <- err
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case d.url = <-found:
	case err := <-d.done:
		t.Fatalf("demo ended before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("demo printed no URL within 10 s")
	}
	return d
}

// wait stops the demo (if it has not stopped by itself) and returns its error.
func (d *demo) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-d.done:
		return err
	case <-time.After(within):
		t.Fatalf("demo still running after %v", within)
		return nil
	}
}

// readEvents reads the stream at url until stop returns true for the
// events seen so far or d passes.
func readEvents(t *testing.T, streamURL string, d time.Duration, stop func([]map[string]any) bool) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream;charset=UTF-8", resp.Header.Get("Content-Type"))

	var events []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "ping: " {
			if stop(events) {
				return events
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(rest), &ev), rest)
			events = append(events, ev)
		}
	}
	return events
}

// latest returns the newest event of type typ and name.
func latest(events []map[string]any, typ, name string) map[string]any {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i]["type"] == typ && events[i]["name"] == name {
			return events[i]
		}
	}
	return nil
}

func TestDemoServesPageAndStream(t *testing.T) {
	d := startDemo(t, "-duration", "1m")
	u, err := url.Parse(d.url)
	require.NoError(t, err)
	host, _, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host, "binds only to the address given")

	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(d.url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")

	commands := map[string]string{
		"GetUser": "users", "Charge": "payments", "Query": "search",
		"CheckStock": "inventory", "Generate": "reports", "ForUser": "recommendations",
	}
	// Read until every command has served calls and the small reports pool
	// has rejected some (generous bound: it rejects within a second or two).
	events := readEvents(t, d.url+"hystrix.stream?delay=200", 20*time.Second, func(evs []map[string]any) bool {
		for name := range commands {
			ev := latest(evs, "HystrixCommand", name)
			if ev == nil || ev["requestCount"].(float64) == 0 {
				return false
			}
		}
		gen := latest(evs, "HystrixCommand", "Generate")
		return gen["rollingCountThreadPoolRejected"].(float64) > 0
	})
	for name, group := range commands {
		ev := latest(events, "HystrixCommand", name)
		require.NotNil(t, ev, name)
		assert.Equal(t, group, ev["group"], name)
		assert.Positive(t, ev["requestCount"], name)
		assert.NotNil(t, latest(events, "BulwarkCommand", name), name)
		assert.NotNil(t, latest(events, "BulwarkGroup", group), group)
	}
	assert.Positive(t, latest(events, "HystrixCommand", "Generate")["rollingCountThreadPoolRejected"])
	// Pool groups have a thread-pool event, the semaphore group none.
	assert.NotNil(t, latest(events, "HystrixThreadPool", "reports"))
	assert.Nil(t, latest(events, "HystrixThreadPool", "recommendations"))
	assert.Equal(t, "SEMAPHORE", latest(events, "HystrixCommand", "ForUser")["propertyValue_executionIsolationStrategy"])

	d.stop()
	require.NoError(t, d.wait(t, 15*time.Second))
}

func TestDemoStopsAfterDuration(t *testing.T) {
	d := startDemo(t, "-duration", "1500ms")
	defer d.stop()
	require.NoError(t, d.wait(t, 15*time.Second))
}

// TestDemoHelpIsNotAnError: -h prints the flags and run returns nil, so the
// program exits 0 like every Go tool (browsertest checks the exit status).
func TestDemoHelpIsNotAnError(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var out strings.Builder
		require.NoError(t, run(context.Background(), []string{arg}, &out), arg)
		assert.Contains(t, out.String(), "-addr", arg)
		assert.Contains(t, out.String(), "-duration", arg)
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "-1s"},
		{"-load", "0"},
		{"-commands", "5"},
		{"-commands", "2001"},
		{"-nope"},
		{"-addr", "256.0.0.1:1"},
	} {
		err := run(context.Background(), args, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}

// Stopping the demo ends an open stream too (the stream serves HTTP/1.1 on
// a connection it takes over, which http.Server.Close would leave open).
func TestDemoStopEndsOpenStream(t *testing.T) {
	d := startDemo(t, "-duration", "1m")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(d.url + "hystrix.stream?delay=200")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	_, err = br.ReadString('\n')
	require.NoError(t, err)

	d.stop()
	require.NoError(t, d.wait(t, 15*time.Second))
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, br)
		ended <- err
	}()
	select {
	case err := <-ended:
		assert.NoError(t, err, "the stream ends cleanly")
	case <-time.After(10 * time.Second):
		resp.Body.Close()
		<-ended
		t.Fatal("the stream is still open after the demo stopped")
	}
}

// TestDemoAppliesRulesFile: -rules applies the file at start and again when
// it changes; a bad file at start is an error.
func TestDemoAppliesRulesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"reports": {"maxConcurrent": 3}}}`), 0o600))
	d := startDemo(t, "-duration", "1m", "-rules", path)
	capacity := func(want float64) {
		events := readEvents(t, d.url+"hystrix.stream?delay=100", 10*time.Second, func(evs []map[string]any) bool {
			ev := latest(evs, "BulwarkGroup", "reports")
			return ev != nil && ev["capacity"] == want
		})
		assert.Equal(t, want, latest(events, "BulwarkGroup", "reports")["capacity"])
	}
	capacity(3)
	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"reports": {"maxConcurrent": 5}}}`), 0o600))
	capacity(5)
	d.stop()
	require.NoError(t, d.wait(t, 15*time.Second))

	require.NoError(t, os.WriteFile(path, []byte(`{"groups": {"reports": {"maxConcurent": 5}}}`), 0o600))
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-quiet", "-rules", path}, io.Discard)
	require.ErrorContains(t, err, `line 1, column 25: json: unknown field "maxConcurent"`)
}

// TestDemoFirstViewerGetsHistory: the demo records the history while no
// one watches (Stream.KeepHistory), so the first viewer's sparklines are
// not empty: after a few seconds unwatched, its first events hold a
// history of several points per command.
func TestDemoFirstViewerGetsHistory(t *testing.T) {
	d := startDemo(t, "-duration", "1m")
	time.Sleep(3500 * time.Millisecond) // one point per second from the start: 2 at the least, under load
	events := readEvents(t, d.url+"hystrix.stream", 20*time.Second, func(evs []map[string]any) bool {
		return latest(evs, "HystrixCommand", "GetUser") != nil
	})
	hist := latest(events, dashboard.TypeBulwarkHistory, "GetUser")
	require.NotNil(t, hist, "a BulwarkHistory event for GetUser before the first frame")
	assert.GreaterOrEqual(t, len(hist["points"].([]any)), 2, "points recorded while no one watched")

	d.stop()
	require.NoError(t, d.wait(t, 15*time.Second))
}

// TestDemoLargeService: -commands 40 serves 40 commands: the six stories
// and 34 generated ones in groups of up to twelve, each named once, the
// declared idle ones with no calls.
func TestDemoLargeService(t *testing.T) {
	d := startDemo(t, "-duration", "1m", "-commands", "40")
	names := map[string]map[string]any{}
	readEvents(t, d.url+"hystrix.stream?delay=200", 20*time.Second, func(evs []map[string]any) bool {
		for _, ev := range evs {
			if ev["type"] == dashboard.TypeHystrixCommand {
				names[ev["group"].(string)+"/"+ev["name"].(string)] = ev
			}
		}
		return len(names) >= 40
	})
	assert.Len(t, names, 40)
	groups := map[string]int{}
	for _, ev := range names {
		groups[ev["group"].(string)]++
	}
	for g, n := range groups {
		assert.LessOrEqual(t, n, 12, g)
	}
	assert.Equal(t, 6+3, len(groups), "the six stories' groups and three of generated ones (34 = 12+12+10)")
	// The eighth generated command of a group is declared and never called.
	idle := names["catalog/"+verbs[7]+nouns[7]]
	require.NotNil(t, idle, "catalog's idle command")
	assert.Zero(t, idle["requestCount"])
	assert.Zero(t, idle["rollingCountSuccess"])

	d.stop()
	require.NoError(t, d.wait(t, 15*time.Second))
}
