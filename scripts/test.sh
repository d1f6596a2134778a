#!/usr/bin/env bash
# The whole test suite, from a fresh machine: setup, format check, CPU build + unit/gate tests,
# sanitizer build of the untrusted-input tests, a 45-second HTTP fuzz run, compile-only CUDA
# build, Python oracle tests, a 2-minute server soak.
# Usage: scripts/test.sh          (CI runs exactly this)
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/memra/ccache}
# Relative paths and no cwd in the hash: a fresh clone elsewhere (CI) still hits the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
JOBS=${JOBS:-$(nproc)}

scripts/setup.sh

echo "== clang-format check"
scripts/check_format.sh
echo "== kernel launch check (every kernel waits for its inputs: kernels/launch.cuh)"
python3 scripts/check_kernels.py

echo "== cpu build"
cmake --preset cpu >/dev/null
cmake --build --preset cpu -j "$JOBS"

echo "== cpu tests"
ctest --preset cpu -j "$JOBS"

echo "== asan build + untrusted-input tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$JOBS" --target memra_asan_tests
ctest --preset asan -j "$JOBS" -L asan

echo "== http fuzzer (45 s, libFuzzer + ASan + UBSan)"
# The request reader and the SSE stream writer (fuzz/http_fuzz.cpp), seeded with requests real
# clients sent (fuzz/corpus/http); new inputs go to a scratch corpus in the build folder, and a
# crash leaves its input there too (build/fuzz/crash-*), for CI to keep.
CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMEMRA_FUZZ=ON -DMEMRA_SANITIZE=ON -DMEMRA_TESTS=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  >/dev/null
cmake --build build/fuzz -j "$JOBS" --target http_fuzz
mkdir -p build/fuzz/http-corpus
build/fuzz/fuzz/http_fuzz build/fuzz/http-corpus fuzz/corpus/http -max_total_time=45 \
  -timeout=10 -rss_limit_mb=2048 -artifact_prefix=build/fuzz/ -print_final_stats=1 2>&1 |
  tail -n 40

echo "== cuda build (compile only)"
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
  cmake --preset cuda >/dev/null
  # Only the CUDA targets: the CPU code in this preset is the same code the cpu build just built.
  cmake --build --preset cuda -j "$JOBS" --target memra_cuda_targets
  # Host-side tests of the CUDA build that need no GPU: device selection and its refusals,
  # which steps the fast (--deterministic off) matmul takes, and the attention kernels' head
  # sizes x cache types.
  build/cuda/tests/engine/memra_backend_select_test
  build/cuda/tests/engine/memra_fast_gemm_policy_test
  build/cuda/tests/engine/memra_attention_support_test
else
  echo "nvcc not found: skipping the cuda preset" >&2
  exit 1
fi

echo "== python gates"
MEMRA_BUILD_DIR=$PWD/build/cpu .venv/bin/python -m pytest -q -n "$JOBS" tests/python

echo "== soak (2 minutes, fixture model)"
# Mixed traffic at concurrency 64, then RSS, fds, threads and KV blocks back to their baseline
# (docs/TESTING.md "Soak"). The report stays in the build folder for CI to keep.
MEMRA_BUILD_DIR=$PWD/build/cpu scripts/soak.sh 2m --json build/cpu/soak-report.json
