#!/usr/bin/env bash
# Builds, on this machine, what scripts/hostcpu/bench.sh runs on another
# host that has no Go toolchain (the GPU machine's Intel Xeon, with AMX):
# the kernels' test binary, muser and paritytool, stripped, and the
# llama.cpp source node-llama-cpp 3.21.1 ships (its CPU llama-bench is
# built there), into DIR (default .hostcpu, which git must ignore: add it
# to .git/info/exclude).
#
#   scripts/hostcpu/prepare.sh [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.hostcpu}
mkdir -p "$dir/bin"
cd "$root"
export CGO_ENABLED=0
go test -c -ldflags="-s -w" -o "$dir/bin/kernels.test" ./infer/kernels
go build -ldflags="-s -w" -o "$dir/bin/muser" ./cmd/muser
go build -ldflags="-s -w" -o "$dir/bin/paritytool" ./scripts/parity/paritytool
(cd "$dir" && tar cJf bin.txz bin && rm -rf bin)
[ -f "$dir/llama.cpp.tar.gz" ] || "$root/scripts/cuda/llamacpp-src.sh" "$dir"
du -sh "$dir"/*
