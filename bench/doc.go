// Package bench compares bulwark with its peers (hystrix-go, failsafe-go, gobreaker, sentinel-golang)
// and with raw baselines (direct call, channel semaphore, ants handoff, go statement, clock read).
//
// It is a separate module so that the library's go.mod never depends on its competitors. The
// overhead benchmarks live in overhead_bench_test.go; cmd/timeouts measures the timeout path,
// cmd/protect measures how well each library protects a live HTTP service from a faulty
// dependency, cmd/scale measures bulwark alone at scale (heap per command name, name creation,
// snapshots of thousands of commands, idle groups), and cmd/report turns the benchmark output
// into tables and bench/overhead.svg. bench/run.sh runs everything and writes bench/RESULTS.md:
//
//	cd bench && ./run.sh          # full run, a few minutes on 2 cores
//	cd bench && ./run.sh -quick   # smoke run for CI, under a minute
package bench
