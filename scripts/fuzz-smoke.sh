#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time (default 10s each).
# Seeds live in each package's testdata/fuzz/<Target>/; new crashers land
# there too and must be committed with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
status=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		echo "-- $pkg $t"
		if ! go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" "$pkg"; then
			status=1
		fi
	done
done
exit $status
