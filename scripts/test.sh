#!/usr/bin/env bash
# Runs every check bulwark has, on a fresh machine too. It installs what the tests run for real
# when it is missing (Debian packages: chromium for the browser tests, redis-server, prometheus,
# prometheus-alertmanager),
# starts a private redis-server on a free loopback port for the tests (BULWARK_REDIS_ADDR; stopped
# at the end), checks gofmt, the docs (scripts/doclinks.sh: README.md at most 200 lines, no
# broken relative link in README.md, PERFORMANCE.md and docs/*.md) and that the core packages
# (command, circuit, isolation, metrics) do not depend on go-metrics (only package gmbridge may),
# then in each module (every directory with a go.mod: the library, browsertest/, bench/ and the
# integration modules) runs go mod tidy -diff, go vet, staticcheck and go test -race -count=1
# (-timeout 30m: a package of the library took over 10 minutes on a 2-core machine under heavy
# load), smoke-runs the benchmark programs once (bench/quick.sh), and checks that each published
# module installs with go get at a pretend tag (scripts/publishtest, docs/RELEASING.md). Last it
# prints, as information that never fails, how many identifiers each package exports beside the
# targets of issue 23 (scripts/apicount).
#
# Each stage prints one line with its duration; a stage that fails also prints its whole output,
# and the stages after it still run. The last line is "summary: N passed, M failed" (stages);
# the exit status is 1 if any stage failed. Usage: scripts/test.sh
set -uo pipefail
cd "$(dirname "$0")/.."

logs=$(mktemp -d "${TMPDIR:-/tmp}/bulwark-test.XXXXXX")
redis_pid=""
trap '[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null; rm -rf "$logs"' EXIT
passed=0
last=""
failed=0
began=$EPOCHREALTIME

# seconds START prints the seconds since START (an $EPOCHREALTIME), to a tenth.
seconds() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# stage WHAT COMMAND...: runs COMMAND with its output set aside and prints one line: ok or FAIL,
# WHAT, how many packages passed (go test stages) and the duration. On failure it prints the
# whole output of COMMAND.
stage() {
	local what=$1 start=$EPOCHREALTIME status=ok
	shift
	"$@" </dev/null >"$logs/out" 2>&1 || status=FAIL
	local took detail="" n
	took=$(seconds "$start")
	case $what in
	*"go test"*)
		n=$(grep -c '^ok' "$logs/out")
		detail=" ($n package$([ "$n" = 1 ] || echo s) ok)"
		;;
	esac
	printf '%-4s  %-58s %7ss\n' "$status" "$what$detail" "$took"
	last=$status
	if [ "$status" = ok ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "---- output of: $*"
		cat "$logs/out"
		echo "---- end of output"
	fi
}

# info WHAT COMMAND...: a stage whose output is shown, indented, when it passes too.
info() {
	stage "$@"
	if [ "$last" = ok ]; then sed 's/^/      /' "$logs/out"; fi
}

# indir DIR COMMAND...: runs COMMAND in DIR.
indir() {
	local dir=$1
	shift
	(cd "$dir" && "$@")
}

# install_packages PACKAGE...: installs Debian packages with apt-get.
install_packages() {
	local sudo=sudo
	if [ "$(id -u)" = 0 ]; then sudo=""; fi
	$sudo apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

# start_redis starts redis-server on a free loopback port, without persistence, exports its
# address as BULWARK_REDIS_ADDR and waits until it answers.
start_redis() {
	local port
	for port in $(shuf -i 20000-60000 -n 50); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
	done
	redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$logs/redis.log" 2>&1 &
	redis_pid=$!
	export BULWARK_REDIS_ADDR="127.0.0.1:$port"
	for _ in $(seq 100); do
		if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then return 0; fi
		sleep 0.1
	done
	cat "$logs/redis.log"
	return 1
}

check_gofmt() {
	local unformatted
	unformatted=$(git ls-files --cached --others --exclude-standard '*.go' | xargs gofmt -l) || return
	if [ -n "$unformatted" ]; then
		echo "gofmt would change:"
		echo "$unformatted"
		return 1
	fi
}

echo "bulwark checks: $(go env GOVERSION), $(nproc) CPUs; a stage's output is shown only if it fails"
missing=()
for tool in chromium:chromium redis-server:redis-server redis-cli:redis-tools prometheus:prometheus promtool:prometheus amtool:prometheus-alertmanager prometheus-alertmanager:prometheus-alertmanager; do
	if ! command -v "${tool%%:*}" >/dev/null 2>&1; then missing+=("${tool#*:}"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
	readarray -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	stage "install ${missing[*]} (apt-get)" install_packages "${missing[@]}"
fi
stage "start redis-server on loopback" start_redis
stage "gofmt -l" check_gofmt
stage "docs: README.md at most 200 lines, links resolve" scripts/doclinks.sh

# check_core_deps fails if go-metrics (archived upstream) is among the dependencies of the core
# packages: only the optional bridge, package gmbridge, may import it.
check_core_deps() {
	local core=(./command ./circuit ./isolation ./metrics) deps
	deps=$(go list -deps "${core[@]}") || return
	if grep -q '^github.com/rcrowley/go-metrics' <<<"$deps"; then
		echo "go-metrics is a dependency of ${core[*]}; the importers:"
		go list -deps -f '{{.ImportPath}}: {{join .Imports " "}}' "${core[@]}" | grep -v '^github.com/rcrowley/' | grep 'rcrowley/go-metrics'
		return 1
	fi
}
stage "core packages: no go-metrics in go list -deps" check_core_deps

# staticcheck (pinned) catches what vet does not, dead code (U1000) above all.
staticcheck="go run honnef.co/go/tools/cmd/staticcheck@v0.8.2"
for mod in $(git ls-files --cached --others --exclude-standard go.mod '*/go.mod' | xargs -n1 dirname | sort); do
	name=$mod
	if [ "$mod" = . ]; then name=library; fi
	stage "$name: go mod tidy -diff" indir "$mod" go mod tidy -diff
	stage "$name: go vet ./..." indir "$mod" go vet ./...
	stage "$name: staticcheck ./..." indir "$mod" $staticcheck ./...
	stage "$name: go test -race -count=1 ./..." indir "$mod" go test -race -count=1 -timeout 30m ./...
done
stage "bench: smoke run of every benchmark program (quick.sh)" bench/quick.sh
stage "publish: go get of each published module (publishtest)" go -C scripts/publishtest run .
info "info: exported identifiers per package (apicount)" go run ./scripts/apicount

total=$(awk -v s="$(seconds "$began")" 'BEGIN { printf "%dm%02ds", s / 60, s % 60 }')
if [ "$failed" = 0 ]; then
	echo "all $passed stages passed in $total"
else
	echo "$failed of $((passed + failed)) stages FAILED (their output is above) in $total"
fi
echo "summary: $passed passed, $failed failed"
[ "$failed" = 0 ]
