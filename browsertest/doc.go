// Package browsertest holds bulwark's end-to-end tests that need more than
// the library: the dashboard driven in headless Chromium (chromedp), and the
// demo program (examples/dashboard) built and run as a process, which also
// makes docs/dashboard.png and docs/dashboard-table.png. It is a module of
// its own so that chromedp and the Go release it needs stay out of the
// library's go.mod; it has no code besides its tests. Run it from the
// repository root with
//
//	go -C browsertest test -race -count=1 ./...
//
// Most tests serve a real registry's stream. The page's tests at scale
// (hundreds of commands, ten minutes of history, figures that jitter) serve
// a synthetic stream instead: copies of a real stream's events with fields
// changed, whose keys must be the real ones (synth_test.go).
// TestBrowserLayoutNoOverlap measures the page's boxes at widths from 1024
// to 2560 px; BenchmarkBrowserPage measures its cost per frame:
//
//	go -C browsertest test -run '^$' -bench BrowserPage -benchtime 20x .
//
// scripts/test.sh runs it, installing Chromium when it is missing. Without a
// browser the browser tests skip, except under CI (CI set), where they fail.
package browsertest
