#!/usr/bin/env bash
# Configures and builds a preset (default: cpu) after setup. Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/memra/ccache}
# Relative paths and no cwd in the hash: a fresh clone elsewhere (CI) still hits the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
preset=${1:-cpu}
scripts/setup.sh >/dev/null
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "${JOBS:-$(nproc)}"
