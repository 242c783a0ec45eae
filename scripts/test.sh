#!/usr/bin/env bash
# Runs every check bulwark has, on a fresh machine too: installs what the
# tests need (Chromium for the dashboard's browser test), then vets, lints and tests
# the library with the race detector, and compiles and smoke-runs the
# benchmark module. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
	echo "== installing chromium (browser test)"
	if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted"
	exit 1
fi

echo "== go vet ./..."
go vet ./...

# staticcheck catches what vet does not, dead code (U1000) above all.
staticcheck="go run honnef.co/go/tools/cmd/staticcheck@v0.8.2"
echo "== staticcheck ./..."
$staticcheck ./...

echo "== go test -race -count=1 ./..."
go test -race -count=1 ./...

if [ -f bench/go.mod ]; then
	echo "== bench module: vet, benchmarks once, quick harness runs"
	(
		cd bench
		go vet ./...
		$staticcheck ./...
		go test -run='^$' -bench=. -benchtime=1x ./...
		if [ -x ./quick.sh ]; then ./quick.sh; fi
	)
fi
echo "== all checks passed"
