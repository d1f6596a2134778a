#!/usr/bin/env bash
# Sets up, builds (cpu preset) and runs `memra run` on the default model (Gemma 3 270M Q4_K_M).
# Usage: scripts/run.sh "What is the capital of France?" [memra run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh cpu >/dev/null
prompt=${1:-"What is the capital of France?"}
shift || true
exec build/cpu/tools/memra run -p "$prompt" "$@"
