#!/usr/bin/env bash
# The GPU recipe, on any machine with an NVIDIA GPU: the CUDA runtime check and copy bandwidth,
# kernel-check (+ teeth), the matmul micro-benchmark, the GPU model gate (CUDA vs CPU on the
# fixtures and on synthetic real-shape models), the determinism contract on the GPU, and
# memra bench on memra synth files. Writes receipts to receipts/ (or $MEMRA_RECEIPTS) and logs to
# $OUT (or build/gpu-logs), and prints a short table last.
#
#   scripts/gpu_check.sh [quick|full]      quick: checks + small models; full: + 8B benchmarks
#
# Binaries: $MEMRA_GPU_BIN (what scripts/device_pack.sh packed, e.g. .device/bin), else the
# `device` preset is built here first (needs scripts/setup.sh's packages and nvcc).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-quick}
ROOT=$PWD
LOGS=${OUT:-$ROOT/build/gpu-logs}
RECEIPTS=${MEMRA_RECEIPTS:-$ROOT/receipts}
DAY=$(date -u +%Y-%m-%d)
mkdir -p "$LOGS" "$RECEIPTS"
export MEMRA_SOURCE_DIR=$ROOT
export MEMRA_COMMIT=${MEMRA_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat .device/COMMIT 2>/dev/null || echo unknown)}

if [ -n "${MEMRA_GPU_BIN:-}" ]; then
  BIN=$(cd "$MEMRA_GPU_BIN" && pwd)
  [ -d "$BIN/../lib" ] && export LD_LIBRARY_PATH=$(cd "$BIN/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  scripts/device_pack.sh || exit 1
  BIN=$ROOT/.device/bin
  export LD_LIBRARY_PATH=$ROOT/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

declare -a TABLE
step() {  # step NAME COMMAND...: runs it, logs to $LOGS/NAME.log, records the verdict
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$LOGS/$name.log" 2>&1 </dev/null
  local rc=$?
  TABLE+=("$(printf '%-28s %-6s %4ds' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL:$rc)" $((SECONDS - t0)))")
  tail -n 25 "$LOGS/$name.log"
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/gpu.txt"

step cuda-check "$BIN/memra-cuda-check" --mib 2048 --receipt "$RECEIPTS/$DAY-cuda-runtime-check.json"
step kernel-check "$BIN/memra-kernel-check" --json "$RECEIPTS/$DAY-kernel-check.json"
step kernel-check-teeth "$BIN/memra-kernel-check" --teeth --json "$LOGS/kernel-check-teeth.json"
cp "$LOGS/kernel-check-teeth.json" "$RECEIPTS/$DAY-kernel-check-teeth.json" 2>/dev/null
step kernel-bench "$BIN/memra-kernel-bench" --json "$RECEIPTS/$DAY-kernel-bench.json"

# Determinism contract on the GPU: alone vs batched, prefix hit vs cold, chunked vs whole,
# preempted vs uninterrupted, through Engine::create on the fixtures.
step engine-invariants env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test"

# Synthetic real-shape models (memra synth), made here: weights never travel.
MODELS_DIR=${MEMRA_GPU_MODELS:-/tmp/memra-synth}
mkdir -p "$MODELS_DIR"
synth() {  # synth SHAPE TYPE [extra...] -> path
  local f="$MODELS_DIR/$1-$2.gguf"
  [ -f "$f" ] || "$BIN/memra" synth --shape "$1" --type "$2" --seed 0 -o "$f" "${@:3}" >&2
  echo "$f"
}
GATE_MODELS=(tests/fixtures/models/llama tests/fixtures/models/qwen2 tests/fixtures/models/qwen3
  tests/fixtures/models/gemma3)
for spec in "qwen3-0.6b bf16" "qwen3-0.6b q8_0" "qwen3-0.6b q4_k_m" "gemma3-270m q4_k_m"; do
  f=$(synth $spec) && GATE_MODELS+=("$f")
done
step model-gate python3 scripts/gpu_model_gate.py --bin "$BIN" --json "$RECEIPTS/$DAY-gpu-model-gate.json" "${GATE_MODELS[@]}"

# Speed does not depend on the weights' values: K-quant benchmark files get random valid blocks
# (--fast-quant, seconds instead of minutes); the gate models above are encoded from floats.
BENCH_MODELS=("$(synth qwen3-0.6b q4_k_m)" "$(synth qwen3-0.6b bf16)")
if [ "$MODE" = full ]; then
  for t in q4_k_m q8_0 bf16; do BENCH_MODELS+=("$(synth qwen3-8b $t --fast-quant)"); done
fi
i=0
for m in "${BENCH_MODELS[@]}"; do
  name=$(basename "$m" .gguf)
  step "bench-$name" "$BIN/memra" bench -m "$m" --device cuda -p 512 -n 128 -r 3 \
    --json "$RECEIPTS/$DAY-bench-$name.json"
  i=$((i + 1))
done

echo
echo "== gpu_check ($MODE) on $(head -n1 "$LOGS/gpu.txt"), commit $MEMRA_COMMIT"
printf '%s\n' "${TABLE[@]}"
