#!/usr/bin/env bash
# instructions.sh: instructions per iteration of one benchmark, counted by valgrind's callgrind
# over the whole program as scripts/callpath.sh's first row counts them: the difference of an N
# and a 2N run, divided by N, so that the setup cancels out (GOMAXPROCS=1, no async preemption).
#
#   scripts/instructions.sh PKG BENCH [N]    (N defaults to 100000)
#   scripts/instructions.sh ./command '^BenchmarkExecuteSemaphoreNoTimeout$/^empty$/^serial$'
#   scripts/instructions.sh ./metrics '^BenchmarkRecord$' 1000000
#
# It prints the count and the benchmark's allocs/op line. With FUNCS=1 in the environment it
# then lists each function's own instructions per iteration (callgrind_annotate's exclusive
# counts, the same difference of the two runs), largest first, down to 4 a call: where the
# count sits. Needs valgrind (Debian package).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { echo "usage: scripts/instructions.sh PKG BENCH [N]" >&2; exit 2; }
pkg=$1 bench=$2 n=${3:-100000}
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/b.test" "$pkg"
run() {
	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" \
		"$work/b.test" -test.run='^$' -test.bench="$bench" -test.benchtime="${1}x" -test.benchmem >"$work/log.$1" 2>&1
	awk '/^summary:/ {print $2; exit}' "$work/cg.$1"
}
a=$(run "$n")
b=$(run $((2 * n)))
echo "instructions per iteration: $(((b - a) / n))"
grep -h "allocs/op" "$work/log.$((2 * n))" | head -1
# funcs prints "count<TAB>function" for every function of callgrind output $1, exclusive counts.
funcs() {
	callgrind_annotate --auto=no --inclusive=no --threshold=100 "$1" |
		sed -n -E 's/^ *([0-9,]+) \( *[0-9.]+%\)  (.*)$/\1\t\2/p' |
		sed -E "s/ \[[^]]*\]$//; s/'[0-9]+$//; s/^([0-9,]+)\t[^:]*:/\1\t/" | tr -d ,
}
if [[ ${FUNCS:-} == 1 ]]; then
	funcs "$work/cg.$n" >"$work/fn.a"
	funcs "$work/cg.$((2 * n))" >"$work/fn.b"
	awk -F'\t' -v n="$n" 'NR == FNR { a[$2] += $1; next } $2 != "PROGRAM TOTALS" { b[$2] += $1 }
		END { for (f in b) if ((d = (b[f] - a[f]) / n) >= 4) printf "%6.1f  %s\n", d, f }' "$work/fn.a" "$work/fn.b" | sort -rn
fi
