#!/usr/bin/env bash
# Soak memra-server for DURATION (90s, 2m, 2h): mixed traffic at concurrency 64, then checks that
# every request got a well-formed answer and that RSS, fds, threads and KV blocks came back
# (scripts/soak.py says what passes). The model: $MEMRA_SOAK_MODEL, default the tiny fixture.
# Usage: scripts/soak.sh DURATION [--json REPORT.json] [soak.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/soak.sh DURATION [--json FILE] [options; scripts/soak.py --help]" >&2
  exit 2
fi
exec .venv/bin/python scripts/soak.py "$@"
