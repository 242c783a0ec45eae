#!/usr/bin/env bash
# Smoke run of every benchmark program for CI: ./run.sh -quick (about two minutes; one line per
# program, no figures; writes nothing into the repository).
set -euo pipefail
cd "$(dirname "$0")"
exec ./run.sh -quick
