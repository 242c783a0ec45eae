// Package browsertest holds bulwark's end-to-end tests that need more than
// the library: the dashboard driven in headless Chromium (chromedp), and the
// demo program (examples/dashboard) built and run as a process, which also
// makes docs/dashboard.png. It is a module of its own so that chromedp and
// the Go release it needs stay out of the library's go.mod; it has no code
// besides its tests. Run it from the repository root with
//
//	go -C browsertest test -race -count=1 ./...
//
// scripts/test.sh runs it, installing Chromium when it is missing. Without a
// browser the browser tests skip, except under CI (CI set), where they fail.
package browsertest
