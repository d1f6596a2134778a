#!/usr/bin/env bash
# Builds what a GPU run needs (the `device` preset: sm_90a, portable x86-64-v3 CPU code) and packs
# it into .device/ (ignored by git): bin/ with the executables and test binaries, lib/ with the
# shared libraries a fresh Ubuntu GPU machine lacks; and two archives of it: .device-lib.tar.xz
# (lib/, ~13 MiB) and .device.tar.xz (the rest, ~24 MiB), what a lent GPU machine is sent. There:
#   tar -xJf .device-lib.tar.xz && tar -xJf .device.tar.xz &&
#     MEMRA_GPU_BIN=.device/bin scripts/gpu_check.sh full
# The libraries change only with this machine's packages: where the repository and both archives
# pass what one call may carry, a first call unpacks the libraries and the next (on the machine
# still warm) the binaries; where the repository leaves room for neither whole archive beside it,
# the binaries go in three pieces (.device-part00 .. 02, below), the first with the libraries.
# With --server it also packs what the GPU server tests need (gpu_check.sh server/full: the
# default model's tokenizer, the Python clients' wheels, the pinned chat templates; ~10 MiB more
# packed, which a device call's 64 MiB beside the repository may not have room for).
# With --kernels it packs only the kernel tools (memra-kernel-check, memra-kernel-bench and the
# libraries they need beyond the system's: libfmt) into .device-k/ and .device-k.tar.xz (~18 MiB):
# one call carries them beside the repository with no library call first, for kernel-level A/Bs
# (MEMRA_GPU_BIN=.device-k/bin scripts/gpu_check.sh ab; steps that need memra are left out).
# Usage: scripts/device_pack.sh [--server | --kernels]
set -euo pipefail
SERVER=0
KERNELS=0
case "${1:-}" in
  --server) SERVER=1 ;;
  --kernels) KERNELS=1 ;;
  "") ;;
  *) echo "usage: $0 [--server | --kernels]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/memra/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
# pack_tools DIR TOOL...: builds the tools (the `device` preset), strips them into DIR/bin and
# copies every shared library they need beyond the C/C++ runtime and CUDA's own into DIR/lib (a
# stock Ubuntu 24.04 + CUDA 13 machine lacks fmt, ICU, PCRE2 and may lack libcurl's chain; glibc
# there is newer, so Debian 12's builds of these load fine).
pack_tools() {
  local dir=$1 t f lib
  shift
  cmake --preset device >/dev/null
  cmake --build --preset device -j "${JOBS:-$(nproc)}" --target "$@"
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib"
  for t in "$@"; do
    f=$(find build/device -type f -name "$t" -perm -u+x | head -n 1)
    [ -n "$f" ] || { echo "device_pack: $t was not built" >&2; exit 1; }
    strip -o "$dir/bin/$t" "$f"
  done
  for lib in $(ldd "$dir"/bin/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | ld-linux* | libpthread.so* | librt.so* | \
        libdl.so* | libresolv.so* | libcuda.so* | libcudart* | libcublas* | libnvidia*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
}
# xz_tar ARCHIVE TAR-ARGS...: -9e with one 192 MiB window over the whole archive (one thread:
# threads would cut it into blocks): the binaries each carry the same kernels, and a window that
# spans them all keeps one copy (38 vs 50 MiB with the default 64 MiB window), which keeps a device
# call under its 64 MiB carry limit beside the repository; ~3 min on 2 cores, 1.3 GiB of memory.
xz_tar() {
  local out=$1
  shift
  XZ_OPT="--lzma2=preset=9e,dict=192MiB -T1" tar -cJf "$out" "$@"
}
if [ "$KERNELS" = 1 ]; then
  pack_tools .device-k memra-kernel-check memra-kernel-bench
  git rev-parse HEAD > .device-k/COMMIT 2>/dev/null || true
  xz_tar .device-k.tar.xz .device-k
  echo "device_pack: ok (kernel tools, $(du -sm .device-k.tar.xz | cut -f1) MiB packed)"
  exit 0
fi
pack_tools .device memra memra-cuda-check memra-kernel-check memra-kernel-bench model_run \
  memra_engine_fixture_test memra-server memra-fake-server
if [ "$SERVER" = 1 ]; then
  # What scripts/gpu_server_tests.sh needs on a machine that cannot receive weights or packages: the
  # default model's tokenizer as a vocab-only GGUF (~6 MB; the weights are drawn there), and wheels of
  # the Python clients the server tests use, at this venv's versions, for that machine's Python 3.12.
  mkdir -p .device/vocab .device/wheels
  model=${MEMRA_MODEL_DIR:-$HOME/.cache/memra/models}/gemma-3-270m-q4_k_m.gguf
  if [ -f "$model" ] && [ -x .venv/bin/python ]; then
    .venv/bin/python scripts/vocab_only_gguf.py "$model" .device/vocab/gemma-3-270m.vocab.gguf
    # Every distribution the three clients need, at this venv's versions (their dependency closure:
    # a hand-kept list missed httpx2 when the clients moved to it).
    pins=$(.venv/bin/python - <<'PY'
import importlib.metadata as md
from packaging.requirements import Requirement
seen = {}
def walk(name):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        return
    if d.metadata["Name"].lower() in seen:
        return
    seen[d.metadata["Name"].lower()] = f'{d.metadata["Name"]}=={d.version}'
    for r in d.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate({"extra": "", "python_version": "3.12"}):
            walk(req.name)
for n in ("openai", "anthropic", "jsonschema"):
    walk(n)
print(" ".join(sorted(seen.values())))
PY
  )
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .device/wheels $pins ||
      echo "device_pack: the server tests' wheels could not be fetched (gpu_server_tests.sh will say so)" >&2
  else
    echo "device_pack: no default model ($model) or .venv: the GPU server tests cannot run" >&2
  fi
  # And the pinned test data's chat templates with its stamp (~0.6 MB of its 75; the rest is
  # vocabularies, which the server tests do not read): gpu_server_tests.sh checks only those.
  data=$(.venv/bin/python -c 'import sys; sys.path.insert(0, "scripts"); import fetch_test_data as f; print(f.check())' 2>/dev/null) &&
    mkdir -p .device/test-data && cp -r "$data/.stamp" "$data/chat-templates" .device/test-data/ ||
    echo "device_pack: no pinned test data: the GPU server tests that need it will skip" >&2
fi
git rev-parse HEAD > .device/COMMIT 2>/dev/null || true
xz_tar .device-lib.tar.xz .device/lib
xz_tar .device.tar.xz --exclude=.device/lib .device
# And the binaries' archive in three pieces of its bytes (.device-part00 .. 02, ~8 MiB each), for
# device calls whose repository leaves less room beside it than the whole archive (each binary
# holds the same kernels, so no binary packs alone under ~22 MB): the first call carries the
# libraries and piece 00, the next (the machine still warm) pieces 01 and 02, and joins them:
# cat .device-part0? | tar -xJf -
rm -f .device-part0?
split -n 3 -d .device.tar.xz .device-part
du -sh .device/* .device-lib.tar.xz .device.tar.xz .device-part0?
echo "device_pack: ok ($(du -sm .device | cut -f1) MiB, $(du -sm .device-lib.tar.xz | cut -f1) + $(du -sm .device.tar.xz | cut -f1) MiB packed)"
