#!/usr/bin/env bash
# Keeps the current pack's memra and memra-kernel-bench (and its COMMIT) as the baseline that
# `scripts/gpu_check.sh bins` compares a change with: .device-base.tar.xz (ignored by git; ~19 MiB,
# what a device call carries beside the repository), which unpacks to .device-base/. For a change
# no switch can turn off (an arithmetic every kernel shares):
#   scripts/device_pack.sh && scripts/device_pack_base.sh     # on the baseline's commit
#   (apply the change) && scripts/device_pack.sh              # the change's pack
# then, on the lent machine, each archive in its own call while it stays warm (the working tree
# and two packs pass the 64 MiB a call carries):
#   tar -xJf .device-lib.tar.xz
#   tar -xJf .device-base.tar.xz
#   tar -xJf .device.tar.xz &&
#     MEMRA_GPU_BIN=.device/bin MEMRA_GPU_BIN_BASE=.device-base/bin scripts/gpu_check.sh bins
# For a build option (MEMRA_WEIGHTS_L1): cmake --preset device -DMEMRA_WEIGHTS_L1=plain before the
# first scripts/device_pack.sh, the default (split) before the second.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in .device/COMMIT .device/bin/memra .device/bin/memra-kernel-bench; do
  [ -f "$f" ] || { echo "device_pack_base: no $f (run scripts/device_pack.sh first)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/.device-base/bin"
cp .device/COMMIT "$tmp/.device-base/"
cp .device/bin/memra .device/bin/memra-kernel-bench "$tmp/.device-base/bin/"
# As device_pack.sh: one window over both binaries, which share their kernels.
(cd "$tmp" && XZ_OPT="--lzma2=preset=9e,dict=192MiB -T1" tar -cJf base.tar.xz .device-base)
mv "$tmp/base.tar.xz" .device-base.tar.xz
echo "device_pack_base: ok (baseline $(cut -c1-7 .device/COMMIT), $(du -sm .device-base.tar.xz | cut -f1) MiB packed)"
