#!/usr/bin/env bash
# Fails if any C++/CUDA source differs from clang-format's output (.clang-format at the root).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files -co --exclude-standard -- '*.h' '*.cpp' '*.cu' '*.cuh')
[ -z "$files" ] && exit 0
# shellcheck disable=SC2086
if ! clang-format --dry-run --Werror $files; then
  echo "clang-format: run 'clang-format -i' on the files above" >&2
  exit 1
fi
