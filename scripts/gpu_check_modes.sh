#!/usr/bin/env bash
# Several gpu_check.sh modes in one run, each under its own time limit, with its results kept
# apart: a lent GPU machine stays warm only seconds between calls and one call may run 10 minutes,
# so one call runs the A/Bs that fit in it. Each mode's receipts go to their own folder (no mode
# overwrites another's receipt of the same name) and, where $OUT is set, its log, table and
# receipts come back under $OUT/MODE/; the tables are printed last, one after another.
#   scripts/gpu_check_modes.sh SECONDS:MODE... (e.g. 330:rawx 90:tensorcopy 400:tchunks)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[ $# -gt 0 ] || { echo "usage: $0 SECONDS:MODE..." >&2; exit 2; }
status=0
for arg in "$@"; do
  limit=${arg%%:*} mode=${arg#*:}
  rm -rf build/gpu-logs
  receipts=${TMPDIR:-/tmp}/memra-receipts-$mode
  rm -rf "$receipts" && mkdir -p "$receipts"
  MEMRA_RECEIPTS=$receipts timeout -s TERM "$limit" scripts/gpu_check.sh "$mode" >/dev/null 2>&1 ||
    status=1
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT/$mode"
    for f in gpu_check.log table.txt receipts.tar; do
      [ -f "$OUT/$f" ] && mv "$OUT/$f" "$OUT/$mode/$f"
    done
  fi
done
if [ -n "${OUT:-}" ]; then
  for arg in "$@"; do
    mode=${arg#*:}
    echo "== $mode"
    cat "$OUT/$mode/table.txt" 2>/dev/null
  done
fi
exit $status
