#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time (default 10s each).
# Seeds live in each package's testdata/fuzz/<Target>/; new crashers land
# there too and must be committed with the fix.
#
# Go's fuzzing coordinator sometimes ends a run that found nothing with
# "context deadline exceeded" (the fuzz time ran out while a worker was
# still reporting); such a run, with no failing input written, is run
# again, up to three runs in all (it has happened to a different target in
# two runs of the whole smoke on a 2-core machine). A failing input is
# always a failure.
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
		ok=
		for attempt in 1 2 3; do
			if fuzz "$pkg" "$t"; then
				ok=1
				break
			fi
			if grep -q 'Failing input written' "$out" || ! grep -q 'context deadline exceeded' "$out"; then
				break
			fi
			[ "$attempt" -lt 3 ] && echo "-- $pkg $t: the coordinator timed out without a failing input; running it again"
		done
		[ -n "$ok" ] && continue
		status=1
	done
done
exit $status
