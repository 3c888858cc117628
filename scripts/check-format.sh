#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails if any C source is not formatted as .clang-format says.
# scripts/check-format.sh --fix rewrites them instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=$(git ls-files '*.c' '*.h')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i $files
  exit 0
fi
clang-format --dry-run --Werror $files
