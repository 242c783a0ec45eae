package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the run if the program leaves a goroutine behind (the ants
// package's own default pool, started when it loads, excepted).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

var urlLine = regexp.MustCompile(`bulwark fleet view: (http://\S+/) `)

// TestFleetViewMergesThreeInstances runs the program, reads its merged
// stream until every command is reported by the three instances, then
// stops it and expects a clean exit.
func TestFleetViewMergesThreeInstances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-quiet"}, pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	var page string
	select {
	case page = <-found:
	case err := <-done:
		t.Fatalf("ended before serving: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no URL within 10 s")
	}

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	sctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, page+"hystrix.stream", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	hosts := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && len(hosts) < 3 {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		if ev["type"] == "HystrixCommand" && ev["reportingHosts"] == 3.0 && ev["rollingCountSuccess"].(float64) > 0 {
			hosts[ev["name"].(string)] = ev["reportingHosts"].(float64)
		}
	}
	resp.Body.Close()
	assert.Len(t, hosts, 3, "GetUser, Charge and CheckStock merged from 3 instances: %v", hosts)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after cancel")
	}
	client.CloseIdleConnections()
}

func TestFleetViewHelpAndBadFlags(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"-h"}, &out))
	assert.Contains(t, out.String(), "-instances")
	assert.Error(t, run(context.Background(), []string{"-instances", "0"}, io.Discard))
	assert.Error(t, run(context.Background(), []string{"-join", "ftp://nope"}, io.Discard))
}
