#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_man_urls.sh SOURCE_DIR: docs/dlock.1's URLS section names every URL
# scheme a backend serves (each backend's `schemes[]` in src/backend), and
# the page holds no control characters (a "\f" escape typed as a form feed
# renders as garbage).
set -u
src=${1:?usage: test_man_urls.sh SOURCE_DIR}
page=$src/docs/dlock.1
fail=0
urls=$(sed -n '/^\.SH URLS/,/^\.SH /p' "$page")
# the arrays as clang-format lays them out, over several lines too
schemes=$(cat "$src"/src/backend/*/*.c | tr '\n' ' ' | grep -o 'schemes\[\] = {[^}]*}' |
  grep -o '"[^"]*"' | tr -d '"')
[ -n "$schemes" ] || { echo "FAIL: no schemes found in $src/src/backend" >&2; exit 1; }
for scheme in $schemes; do
  if ! printf '%s\n' "$urls" | grep -q -- "$scheme://"; then
    echo "FAIL: docs/dlock.1 URLS does not name $scheme://" >&2
    fail=1
  fi
done
if LC_ALL=C grep -n '[[:cntrl:]]' "$page" | grep -v $'\t' | grep -q .; then
  echo "FAIL: docs/dlock.1 has control characters:" >&2
  LC_ALL=C grep -n '[[:cntrl:]]' "$page" | cat -A | head -5 >&2
  fail=1
fi
[ "$fail" -eq 0 ] && echo "docs/dlock.1 names every scheme: ${schemes//$'\n'/ }"
exit "$fail"
