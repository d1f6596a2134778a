#!/usr/bin/env bash
# The server's Python tests (tests/python: the server suites and the serving benchmarks' tests)
# against an engine on the GPU: issue 9's "every existing server test that can run against a GPU
# engine passes there too". For a machine with an NVIDIA GPU and none of this repository's setup
# (a lent one: no packages, no network, no real weights):
#   - binaries from BIN (scripts/device_pack.sh's .device/bin), arranged as the build tree the tests
#     expect;
#   - the default model made there: `memra synth --shape gemma3-270m --type q4_k_m --vocab-from
#     VOCAB`, the real tokenizer (VOCAB: scripts/vocab_only_gguf.py's few MB) over random weights.
#     Tests marked real_weights need the real model's answers and are deselected;
#   - Python packages the machine lacks (openai, anthropic, jsonschema) from the wheels in WHEELS
#     (device_pack.sh's .device/wheels), installed under a temporary folder;
#   - MEMRA_DEVICE (default cuda): every memra-server the tests start runs there. MEMRA_DEVICE=cpu
#     runs the same selection on the CPU, to check this script on a machine without a GPU.
# Tests that need the pinned test data's chat templates read device_pack.sh's copy of them
# (.device/test-data), or skip by name where there is none. With RECEIPT, writes the outcome of
# every test there as JSON.
#
#   scripts/gpu_server_tests.sh BIN VOCAB [RECEIPT.json]   (WHEELS: the wheels, default BIN/../wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BIN VOCAB.gguf [RECEIPT.json]" >&2; exit 2; }
BIN=$(cd "$1" && pwd)
VOCAB=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
RECEIPT=${3:-}
WHEELS=${WHEELS:-$BIN/../wheels}
WORK=${MEMRA_SERVER_TESTS_DIR:-/tmp/memra-server-tests}
export MEMRA_DEVICE=${MEMRA_DEVICE:-cuda}
PY=${PYTHON:-python3}

rm -rf "$WORK/build" && mkdir -p "$WORK/build/tools/server" "$WORK/build/tests/server" "$WORK/models"
# The packed shared libraries (BIN/../lib: Debian's libcurl, fmt, ICU...) serve memra's binaries
# only: each is reached through a wrapper that adds them. In the tests' own environment they would
# shadow the machine's (its curl failed on Debian's libcurl: "undefined symbol curl_global_trace").
LIBS=""
if [ -d "$BIN/../lib" ]; then
  LIBS=$(cd "$BIN/../lib" && pwd)
  LD_LIBRARY_PATH=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | { grep -vxF "$LIBS" || true; } | paste -sd:)
  [ -n "$LD_LIBRARY_PATH" ] && export LD_LIBRARY_PATH || unset LD_LIBRARY_PATH
fi
wrap() {  # wrap NAME PATH: PATH runs BIN/NAME with the packed libraries
  if [ -z "$LIBS" ]; then ln -s "$BIN/$1" "$2"; return; fi
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
    "$LIBS" "$BIN/$1" >"$2"
  chmod +x "$2"
}
wrap memra "$WORK/build/tools/memra"
wrap memra-server "$WORK/build/tools/server/memra-server"
wrap memra-fake-server "$WORK/build/tests/server/memra-fake-server"

MODEL=$WORK/models/gemma-3-270m-q4_k_m.gguf
"$WORK/build/tools/memra" synth --shape gemma3-270m --type q4_k_m --fast-quant --vocab-from "$VOCAB" \
  -o "$MODEL" >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; exit 1; }

if ! "$PY" -c 'import openai, anthropic, jsonschema' 2>/dev/null; then
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "$0: openai/anthropic/jsonschema missing and no wheels in $WHEELS" >&2; exit 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$WHEELS"/*.whl
  export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH}
fi

export MEMRA_BUILD_DIR=$WORK/build MEMRA_MODEL_DIR=$WORK/models MEMRA_ALLOW_MISSING_TEST_DATA=1
# The pinned test data's chat templates where device_pack.sh packed them (only those are checked).
if [ -z "${MEMRA_TEST_DATA:-}" ] && [ -f "$BIN/../test-data/.stamp" ]; then
  export MEMRA_TEST_DATA=$(cd "$BIN/../test-data" && pwd) MEMRA_TEST_DATA_ONLY=chat-templates/
fi
TESTS=(tests/python/test_server_*.py tests/python/test_bench_serve.py
  tests/python/test_bench_server_latency.py)
ARGS=(-q -p no:cacheprovider -m "not real_weights" -rs)
"$PY" -c 'import xdist' 2>/dev/null && ARGS+=(-n "${JOBS:-4}")
ARGS+=(--junitxml "$WORK/junit.xml")
echo "gpu_server_tests: ${TESTS[*]} on MEMRA_DEVICE=$MEMRA_DEVICE, $(basename "$MODEL") from $(basename "$VOCAB")"
rc=0
"$PY" -m pytest "${ARGS[@]}" "${TESTS[@]}" || rc=$?
[ -z "$RECEIPT" ] && exit $rc
COMMIT=${MEMRA_COMMIT:-$(cat "$BIN/../COMMIT" 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
"$PY" - "$WORK/junit.xml" "$RECEIPT" "$MEMRA_DEVICE" "$COMMIT" "$rc" <<'PY'
import datetime, json, sys, xml.etree.ElementTree as ET
xml, out, device, commit, rc = sys.argv[1:]
tests = []
for case in ET.parse(xml).getroot().iter("testcase"):
    kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
    tests.append({"name": f"{case.get('classname')}::{case.get('name')}",
                  "outcome": kinds[0] if kinds else "passed"})
count = {k: sum(t["outcome"] == k for t in tests) for k in ("passed", "failure", "error", "skipped")}
json.dump({"what": "gpu-server-tests", "device": device, "commit": commit,
           "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "pass": rc == "0" and count["failure"] + count["error"] == 0, **count,
           "deselected": "real_weights", "tests": tests}, open(out, "w"), indent=1)
print(f"gpu_server_tests: {count} -> {out}")
PY
exit $rc
