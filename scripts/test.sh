#!/usr/bin/env bash
# The test command named in README.md. CI (.ci/run) calls it on a clean
# clone with ../shared beside it; a newcomer runs it the same way.
set -euo pipefail
cd "$(dirname "$0")/.."

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
go test -count=1 ./...

echo "== go test -race (pack, store)"
go test -count=1 -race ./pack/... ./store/...

echo "== go test -race (serve: scheduler, HTTP, clients)"
go test -count=1 -race ./serve/...

echo "== go test -race (net: mTLS, cluster, transport, replication, prefill)"
go test -count=1 -race ./net/...

echo "== fuzz smoke (every Fuzz target, ${FUZZTIME:=10s} each)"
bash scripts/fuzz-smoke.sh "$FUZZTIME"

echo "OK"
