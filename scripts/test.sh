#!/usr/bin/env bash
# The test command named in README.md. CI (.ci/run) calls it on a clean
# clone with ../shared beside it; a newcomer runs it the same way.
set -euo pipefail
cd "$(dirname "$0")/.."

# gotest runs go test with the given arguments. When it fails it repeats,
# at the end of its output, the lines that say what failed (a timeout's
# list of the tests still running, the FAIL lines), which the goroutine
# dump of a hung test would otherwise push out of a log's tail.
gotest() {
	local log
	log=$(mktemp)
	if go test "$@" 2>&1 | tee "$log"; then
		rm -f "$log"
		return 0
	fi
	echo "== what failed (go test $*)"
	grep -E -A6 '^panic: test timed out|^running tests:' "$log" | head -40 || true
	grep -E '^(--- FAIL|FAIL)' "$log" | head -40 || true
	rm -f "$log"
	return 1
}

echo "== gofmt / go vet"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...

echo "== npm ci (serve/clienttest: the official openai and ollama clients)"
if command -v npm >/dev/null; then
	npm ci --prefix serve/clienttest --no-audit --no-fund
else
	echo "npm not found: serve/clienttest's TestJSClients will skip (or fail under CI=true / MUSER_REQUIRE_NODE=1)"
fi

echo "== go test ./..."
# The CUDA kernels' emulator suite and the scheduler's take 4-6 minutes on
# a 2-core machine: more room than go test's default 10 minutes a
# package, so that a busy machine does not fail them.
gotest -count=1 -timeout 20m ./...

echo "== go test -race (pack, store)"
gotest -count=1 -timeout 20m -race ./pack/... ./store/...

echo "== go test -race (serve: scheduler, HTTP, clients)"
# Under the race detector the scheduler's property tests draw fewer cases
# (one seed, one draft length: raceDetector in serve/sched); its package
# took 5.6 minutes alone on a 2-core machine (6 December 2026), serve's
# own about 8 beside it. The ceiling leaves room for a slower machine; a
# hung test still ends the run.
gotest -count=1 -timeout 20m -race ./serve/...

echo "== go test -race (net: mTLS, cluster, transport, replication, prefill)"
gotest -count=1 -timeout 20m -race ./net/...

echo "== fuzz smoke (every Fuzz target, ${FUZZTIME:=10s} each)"
bash scripts/fuzz-smoke.sh "$FUZZTIME"

echo "OK"
