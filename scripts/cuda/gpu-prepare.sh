#!/usr/bin/env bash
# Builds, on this machine, what scripts/cuda/gpu-check.sh runs on a GPU
# machine that has no Go toolchain: the GPU test binaries and muser,
# stripped, and a copy of the shared test model, into DIR (default .gpu,
# which git must ignore: add it to .git/info/exclude).
#
#   scripts/cuda/gpu-prepare.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.gpu}
mkdir -p "$dir/bin" "$dir/shared/models"
cd "$root"
export CGO_ENABLED=0
for p in cu cukernels; do
	go test -c -ldflags="-s -w" -o "$dir/bin/$p.test" ./infer/engine/cuda/internal/$p
done
go test -c -ldflags="-s -w" -o "$dir/bin/cuda.test" ./infer/engine/cuda
go test -c -ldflags="-s -w" -o "$dir/bin/cmd.test" ./cmd/muser
go build -ldflags="-s -w" -o "$dir/bin/muser" ./cmd/muser
go build -ldflags="-s -w" -o "$dir/bin/paritytool" ./scripts/parity/paritytool
go build -ldflags="-s -w" -o "$dir/bin/servebench" ./serve/servebench
cp "$root/../shared/models/stories260K.gguf" "$dir/shared/models/"
(cd "$dir" && tar czf bin.tgz bin && rm -rf bin)
du -sh "$dir"/*
