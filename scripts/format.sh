#!/usr/bin/env bash
# clang-format every tracked C file (--check: report and fail, change nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h'; git ls-files -o --exclude-standard '*.c' '*.h')
[ ${#files[@]} -gt 0 ] || exit 0
if [ "${1:-}" = --check ]; then
	clang-format --dry-run -Werror "${files[@]}"
	echo "format: ${#files[@]} files clean"
else
	clang-format -i "${files[@]}"
fi
