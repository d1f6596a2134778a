#!/usr/bin/env bash
# Builds what a GPU run needs (the `device` preset: sm_90a, portable x86-64-v3 CPU code) and packs
# it into .device/ (ignored by git): bin/ with the executables and test binaries, lib/ with the
# shared libraries a fresh Ubuntu GPU machine lacks; and .device.tar.xz, the same compressed
# (~15 MiB instead of ~77: what a lent GPU machine is sent). There:
#   tar -xJf .device.tar.xz && MEMRA_GPU_BIN=.device/bin scripts/gpu_check.sh full
# Usage: scripts/device_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/memra/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
TARGETS=(memra memra-cuda-check memra-kernel-check memra-kernel-bench model_run
  memra_engine_fixture_test memra-server)
cmake --preset device >/dev/null
cmake --build --preset device -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}"

rm -rf .device && mkdir -p .device/bin .device/lib
for t in "${TARGETS[@]}"; do
  f=$(find build/device -type f -name "$t" -perm -u+x | head -n 1)
  [ -n "$f" ] || { echo "device_pack: $t was not built" >&2; exit 1; }
  strip -o ".device/bin/$t" "$f"
done
# Every shared library beyond the C/C++ runtime and CUDA's own (a stock Ubuntu 24.04 + CUDA 13
# machine lacks fmt, ICU, PCRE2 and may lack libcurl's chain; glibc there is newer, so Debian 12's
# builds of these load fine).
for lib in $(ldd .device/bin/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | ld-linux* | libpthread.so* | librt.so* | \
      libdl.so* | libresolv.so* | libcuda.so* | libcudart* | libcublas* | libnvidia*) ;;
    *) cp -L "$lib" .device/lib/ ;;
  esac
done
git rev-parse HEAD > .device/COMMIT 2>/dev/null || true
# -9e: a third of the default level's size (22 vs 49 MiB), which keeps a device call under its 64 MiB
# carry limit; ~80 s on 2 cores.
XZ_OPT="-9e -T0" tar -cJf .device.tar.xz .device
du -sh .device/bin .device/lib .device.tar.xz
echo "device_pack: ok ($(du -sm .device | cut -f1) MiB, $(du -sm .device.tar.xz | cut -f1) MiB packed)"
