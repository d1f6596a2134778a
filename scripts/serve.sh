#!/usr/bin/env bash
# Sets up, builds (cpu preset) and starts memra-server on the default model (Gemma 3 270M Q4_K_M)
# at http://127.0.0.1:8080. Flags and MEMRA_* variables pass through (docs/SERVING.md).
# Usage: scripts/serve.sh [memra-server flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh cpu >/dev/null
exec build/cpu/tools/server/memra-server "$@"
