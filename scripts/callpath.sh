#!/usr/bin/env bash
# callpath.sh: what Execute costs now against a base commit, measured two ways.
#
#   scripts/callpath.sh [BASE] [ROUNDS]    (defaults: 2fa418d, 30)
#
# 1. Instructions per call (valgrind's callgrind, the difference of a 100000x
#    and a 200000x run, so that the setup cancels out): the whole program
#    for the semaphore path without a timeout, whose count is stable;
#    bulwark's own functions for the timed and pool paths, where timers and
#    the scheduler make the rest vary. The token-bucket row needs a commit
#    that has BenchmarkExecuteSemaphoreTokenBucket (base prints "-").
# 2. Wall clock: both test binaries run in turns (each first in every other
#    round), ROUNDS times, pinned to one CPU with GOMAXPROCS=1, then
#    benchstat; and, on the current tree, the semaphore path with and
#    without a token bucket. The pool rows hand each call to a worker
#    goroutine: on a shared 2-core VM they vary by 10-40% from run to run.
#
# Needs valgrind (Debian package) and benchstat (installed here if absent).
# PERFORMANCE.md quotes its output.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-2fa418d}
rounds=${2:-30}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"' EXIT

command -v valgrind >/dev/null || { echo "callpath.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
benchstat=$(command -v benchstat || true)
if [[ -z $benchstat ]]; then
	GOBIN="$work/bin" go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
	benchstat="$work/bin/benchstat"
fi

git worktree add --detach -q "$work/base" "$base"
(cd "$work/base" && go test -c -o "$work/base.test" ./command/)
go test -c -o "$work/now.test" ./command/

# count BIN BENCH MODE: instructions per call; MODE "all" or "own".
count() {
	local bin=$1 bench=$2 mode=$3 n out
	local -a per=()
	for n in 1 2; do
		out="$work/cg.$n"
		GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file="$out" \
			"$bin" -test.run='^$' -test.bench="^Benchmark$bench\$/^empty\$/^serial\$" -test.benchtime=${n}00000x >/dev/null 2>&1
		if [[ $mode == all ]]; then
			per+=("$(callgrind_annotate --auto=no "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')")
		else
			per+=("$(callgrind_annotate --auto=no --threshold=100 "$out" |
				awk '/bulwark-go\/bulwark/ && $1 ~ /^[0-9,]+$/ {gsub(",", "", $1); s += $1} END {print s}')")
		fi
	done
	echo $(((per[1] - per[0]) / 100000))
}

echo "instructions per call ($base -> now)"
for row in ExecuteSemaphoreNoTimeout:all ExecuteSemaphoreTimeout:own ExecutePool:own ExecutePoolNoTimeout:own ExecuteSemaphoreTokenBucket:all; do
	bench=${row%%:*} mode=${row##*:}
	b=-
	if "$work/base.test" -test.list="^Benchmark$bench\$" | grep -q .; then
		b=$(count "$work/base.test" "$bench" "$mode")
	fi
	printf '  %-30s %-4s %6s -> %6s\n' "$bench" "$mode" "$b" "$(count "$work/now.test" "$bench" "$mode")"
done

paths='^BenchmarkExecute(SemaphoreNoTimeout|SemaphoreTimeout|Pool|PoolNoTimeout)$/^empty$/^serial$'
limit='^BenchmarkExecuteSemaphore(NoTimeout|TokenBucket)$/^empty$/^serial$'
order=(base now)
for ((i = 0; i < rounds; i++)); do
	order=("${order[1]}" "${order[0]}") # each goes first in turn
	for v in "${order[@]}"; do
		GOMAXPROCS=1 taskset -c 1 "$work/$v.test" -test.run='^$' -test.bench="$paths" -test.benchtime=100000x >>"$work/$v.txt"
	done
	GOMAXPROCS=1 taskset -c 1 "$work/now.test" -test.run='^$' -test.bench="$limit" -test.benchtime=200000x >>"$work/limit.txt"
done
echo
echo "wall clock, $rounds alternating runs:"
"$benchstat" base="$work/base.txt" now="$work/now.txt" | awk '/│/ {p = 1} p && /^$/ {exit} p'
echo
echo "the semaphore path without and with a token bucket that always has a token:"
grep -v TokenBucket "$work/limit.txt" >"$work/nolimit.txt"
grep -v NoTimeout "$work/limit.txt" | sed 's/SemaphoreTokenBucket/SemaphoreNoTimeout/' >"$work/bucket.txt"
"$benchstat" none="$work/nolimit.txt" bucket="$work/bucket.txt" | awk '/│/ {p = 1} p && /^$/ {exit} p'
