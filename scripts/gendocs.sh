#!/usr/bin/env bash
# Regenerate (or with --check, verify) the generated parts of docs/:
# docs/errors.md from mc_err.h and the option tables in docs/config.md
# between the "BEGIN GENERATED" and "END GENERATED" markers.
#   scripts/gendocs.sh [--check] [MC_ERRDOC PROGRAM...]
# Each PROGRAM prints its table with --help_markdown, in the order given.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
errdoc=${1:-build-gcc/tests/tools/mc_errdoc}
shift || true
progs=("$@")
if [ ${#progs[@]} -eq 0 ]; then
	progs=(build-gcc/metad/mooncake_metad build-gcc/master/mooncake_master
		build-gcc/mooncakefs/cli/mooncake_client
		build-gcc/mooncakefs/cli/mooncake
		build-gcc/tests/tools/store_cfgdoc)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$errdoc" >"$tmp/errors.md"
{
	sed '/<!-- BEGIN GENERATED -->/q' docs/config.md
	for p in "${progs[@]}"; do
		"$p" --help_markdown
		echo
	done
	sed -n '/<!-- END GENERATED -->/,$p' docs/config.md
} >"$tmp/config.md"

status=0
for f in errors.md config.md; do
	if [ $check = 1 ]; then
		if ! diff -u "docs/$f" "$tmp/$f"; then
			echo "docs/$f is stale: run scripts/gendocs.sh" >&2
			status=1
		fi
	else
		cp "$tmp/$f" "docs/$f"
	fi
done
exit $status
