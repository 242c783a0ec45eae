#!/usr/bin/env bash
# Runs every bulwark benchmark against its peers and writes the results.
#
#   ./run.sh          full run (about 10 minutes on 2 cores): overhead benchmarks, each case in a
#                     process of its own, ROUNDS rounds in a shuffled order, summarised by
#                     benchstat; CPU profiles; timeout path; live-service protection; writes
#                     RESULTS.md and overhead.svg beside this script, and prints what it writes.
#   ./run.sh -quick   smoke run for CI (about two minutes): the same programs and the same per-case
#                     runner, one round of one iteration, short phases, and cmd/scale (issue 24's
#                     rows, whose figures PERFORMANCE.md keeps) at its smallest; prints one line per
#                     program and no figures (one iteration measures nothing), the whole output of
#                     a program that fails; writes nothing into the repository.
#
# Environment (full run): ROUNDS (default 8) and BENCHTIME (default 300ms) set the rounds and the
# time of each case's run.
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bulwark-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# overhead ROUNDS BENCHTIME OUT: builds the benchmark binary once, lists its cases (one iteration of
# each, in one process), then runs every case in a process of its own, ROUNDS times, each round in
# a fresh shuffled order, so that no case always follows another or shares a process with a peer's
# background goroutines (sentinel's collectors, hystrix-go's metric exchangers). Writes the rounds
# in OUT, in the format benchstat reads.
overhead() {
	local rounds=$1 benchtime=$2 out=$3 bin="$tmp/bench.test" r c
	go test -c -o "$bin" .
	"$bin" -test.run='^$' -test.bench=. -test.benchtime=1x >"$tmp/list.txt"
	grep -E '^(goos|goarch|pkg|cpu):' "$tmp/list.txt" >"$out"
	local -a cases
	mapfile -t cases < <(awk '/^Benchmark/ { sub(/-[0-9]+$/, "", $1); print $1 }' "$tmp/list.txt")
	[ "${#cases[@]}" -gt 0 ] || { cat "$tmp/list.txt"; return 1; }
	for ((r = 1; r <= rounds; r++)); do
		for c in $(printf '%s\n' "${cases[@]}" | shuf); do
			"$bin" -test.run='^$' -test.bench="^${c%%/*}\$/^${c#*/}\$" -test.benchtime="$benchtime" \
				-test.benchmem >"$tmp/case.txt" || { cat "$tmp/case.txt"; return 1; }
			grep '^Benchmark' "$tmp/case.txt" >>"$out" || { echo "$c: no result"; cat "$tmp/case.txt"; return 1; }
		done
		echo "round $r of $rounds done" >&2
	done
}

if [ "${1:-}" = "-quick" ]; then
	# smoke WHAT OUT COMMAND...: runs COMMAND with its stdout in OUT; prints "ok  WHAT", or
	# the command and its whole output when it fails.
	smoke() {
		local what=$1 out=$2
		shift 2
		if "$@" >"$out" 2>"$tmp/stderr"; then
			echo "ok    $what"
		else
			echo "FAIL  $what: $*"
			cat "$out" "$tmp/stderr"
			return 1
		fi
	}
	smoke "overhead benchmarks, one iteration of each case in a process of its own" "$tmp/runner.txt" \
		overhead 1 1x "$tmp/bench.txt"
	smoke "report of them (cmd/report)" "$tmp/overhead.md" \
		go run ./cmd/report -in "$tmp/bench.txt" -svg "$tmp/overhead.svg"
	smoke "benchstat of them" "$tmp/benchstat.txt" go tool benchstat "$tmp/bench.txt"
	smoke "timeout path (cmd/timeouts -quick)" "$tmp/timeouts.md" go run ./cmd/timeouts -quick
	smoke "protection of a live service (cmd/protect -quick)" "$tmp/protect.md" go run ./cmd/protect -quick
	smoke "issue 24's rows (cmd/scale -quick, one round)" "$tmp/scale.md" go run ./cmd/scale -quick -rounds 1 -idle 1s
	exit 0
fi

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
rounds=${ROUNDS:-8}
benchtime=${BENCHTIME:-300ms}
proftime=2s
out=RESULTS.md
svg=overhead.svg

bench_cmd="go test -c -o bench.test . && $rounds rounds, each running every case (GROUP/CASE) once in a new shuffled order:
  ./bench.test -test.run='^\$' -test.bench='^BenchmarkGROUP\$/^CASE\$' -test.benchtime=$benchtime -test.benchmem >> bench.txt"
prof_cmd="go test -run='^\$' -bench='^BenchmarkCommand\$/^bulwark-NAME\$' -benchtime=$proftime -cpuprofile=NAME.out -o bench.test . && go tool pprof -top [-cum] bench.test NAME.out  # NAME: semaphore, pool"
timeouts_cmd="go run ./cmd/timeouts"
protect_cmd="go run ./cmd/protect"
report_cmd="go run ./cmd/report -in bench.txt -svg overhead.svg
go tool benchstat bench.txt"

echo "== go vet ./..." >&2
go vet ./...

echo "== overhead benchmarks: $bench_cmd" >&2
overhead "$rounds" "$benchtime" "$tmp/bench.txt"
go tool benchstat "$tmp/bench.txt" >"$tmp/benchstat.txt"

echo "== CPU profiles of the bulwark commands" >&2
for name in semaphore pool; do
	{
		echo "### bulwark-$name"
		go test -run='^$' -bench="^BenchmarkCommand\$/^bulwark-$name\$" -benchtime="$proftime" \
			-cpuprofile="$tmp/$name.out" -o "$tmp/bench.test" . | grep '^Benchmark' || echo "(no such benchmark)"
		if [ -s "$tmp/$name.out" ]; then
			echo "# flat"
			go tool pprof -top -nodecount=15 "$tmp/bench.test" "$tmp/$name.out" 2>/dev/null
			echo "# cumulative"
			go tool pprof -top -cum -nodecount=30 "$tmp/bench.test" "$tmp/$name.out" 2>/dev/null | sed -n '/flat%/,$p'
		fi
		echo
	} >>"$tmp/profile.txt"
done

echo "== timeout path: $timeouts_cmd" >&2
go run ./cmd/timeouts >"$tmp/timeouts.md"

echo "== protection: $protect_cmd" >&2
go run ./cmd/protect >"$tmp/protect.md"

load_end=$(cut -d' ' -f1-3 /proc/loadavg)
machine_cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
subtitle="$(nproc) cores, $machine_cpu, $(go env GOVERSION), $rounds rounds of one process per case, -benchtime=$benchtime; bars: serial (top) and b.RunParallel (bottom)"
go run ./cmd/report -in "$tmp/bench.txt" -svg "$svg" -subtitle "$subtitle" >"$tmp/overhead.md"

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C .. status --porcelain --untracked-files=no 2>/dev/null | grep -v ' bench/RESULTS.md$' | grep -v ' bench/overhead.svg$' || true)" ]; then
	rev="$rev (work tree has uncommitted changes)"
fi

{
	echo "# bulwark benchmark results"
	echo
	echo "Written by \`bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') at bulwark commit $rev."
	echo "Absolute numbers drift between machines and runs; compare ratios within this run."
	echo
	echo "## Machine"
	echo
	echo "- nproc: $(nproc)"
	echo "- CPU: $machine_cpu"
	echo "- Go: $(go version)"
	echo "- OS: $(uname -sr)"
	echo "- Load average (1/5/15 min) at start: $load_start; at end: $load_end (other work on the machine skews absolute numbers)"
	echo "- Peers (bench/go.mod):"
	go list -m github.com/afex/hystrix-go github.com/failsafe-go/failsafe-go github.com/sony/gobreaker/v2 \
		github.com/alibaba/sentinel-golang github.com/panjf2000/ants/v2 golang.org/x/sync | sed 's/^/  - /'
	echo
	echo "## Commands (run in bench/)"
	echo
	echo '```'
	echo "./run.sh"
	echo "# which runs:"
	echo "go vet ./..."
	echo "$bench_cmd"
	echo "$prof_cmd"
	echo "$timeouts_cmd"
	echo "$protect_cmd"
	echo "$report_cmd"
	echo '```'
	echo
	echo "## Overhead of a protected call"
	echo
	echo "Trivial protected function; every breaker configured never to trip and every bulkhead never"
	echo "to reject, so this is the success path; no case has a fallback. Serial = one goroutine;"
	echo "parallel = b.RunParallel with GOMAXPROCS goroutines (ns/op is wall time per call across all"
	echo "goroutines). Every case ran in a process of its own, $rounds rounds, each round in a new"
	echo "shuffled order (-benchtime=$benchtime per run); figures are benchstat's medians of the rounds"
	echo "with their 95% confidence intervals, and every ratio is of two cases of this run. Each case"
	echo "reports its wall time (ns/op) and its process's CPU time per call (cpu-ns/op: user + system"
	echo "over all threads), which leaves out the time other processes held the cores. The targets"
	echo "pair like with like (the same isolation, a timer on both sides or on neither); comparisons"
	echo "whose sides do different work are in a table of their own and are never a headline. Every"
	echo "pool ratio is against the one raw ants baseline, Baseline/ants-submit-wait (Submit a closure"
	echo "that returns the function's result on a channel, wait for it)."
	echo
	echo "![overhead chart](overhead.svg)"
	echo
	cat "$tmp/overhead.md"
	echo "<details><summary>CPU profiles of the bulwark semaphore and pool commands (serial)</summary>"
	echo
	echo '```'
	cat "$tmp/profile.txt"
	echo '```'
	echo "</details>"
	echo
	echo "## Timeout path"
	echo
	cat "$tmp/timeouts.md"
	echo "## Protection of a live service"
	echo
	cat "$tmp/protect.md"
	echo "<details><summary>benchstat of the rounds (go tool benchstat bench.txt)</summary>"
	echo
	echo '```'
	cat "$tmp/benchstat.txt"
	echo '```'
	echo "</details>"
	echo
	echo "<details><summary>Raw benchmark output (every round, in the order run)</summary>"
	echo
	echo '```'
	cat "$tmp/bench.txt"
	echo '```'
	echo "</details>"
} >"$out"

cat "$out"
echo >&2
echo "== wrote $out and $svg" >&2
