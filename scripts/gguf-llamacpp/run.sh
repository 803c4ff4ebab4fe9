#!/usr/bin/env bash
# Writes tiny GGUF models with muser's GGUF writer and quantizers, then
# loads and evaluates them in llama.cpp (node-llama-cpp 3.21.1, CPU build)
# with check.mjs. Needs ../shared (stories260K) beside the repository and
# the npm registry (npm ci installs the pinned package). Not run by go test.
#   bash scripts/gguf-llamacpp/run.sh [OUTDIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$(mktemp -d)}"
cd "$root"
go run ./scripts/gguf-llamacpp/gen -model ../shared/models/stories260K.gguf -out "$out"
cd "$here"
if [ ! -d node_modules/node-llama-cpp ]; then
	npm ci --no-audit --no-fund
fi
node check.mjs "$out" "$root/../shared/models/golden/stories260K.llama2c-test_all.expected.txt"
