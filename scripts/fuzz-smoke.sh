#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time (default 10s each).
# Seeds live in each package's testdata/fuzz/<Target>/; new crashers land
# there too and must be committed with the fix.
#
# Go's fuzzing coordinator sometimes ends a run that found nothing with
# "context deadline exceeded" (the fuzz time ran out while a worker was
# still reporting); such a run, with no failing input written, is run once
# more. A failing input is always a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fuzz() { go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" "$1" 2>&1 | tee "$out"; }
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		echo "-- $pkg $t"
		if fuzz "$pkg" "$t"; then
			continue
		fi
		if ! grep -q 'Failing input written' "$out" && grep -q 'context deadline exceeded' "$out"; then
			echo "-- $pkg $t: the coordinator timed out without a failing input; running it once more"
			fuzz "$pkg" "$t" && continue
		fi
		status=1
	done
done
exit $status
