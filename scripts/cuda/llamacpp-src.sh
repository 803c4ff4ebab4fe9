#!/usr/bin/env bash
# Extracts the llama.cpp source that node-llama-cpp 3.21.1 ships
# (llama/gitRelease.bundle, tag v0.4.0) from the npm registry, pruned to
# what its CUDA llama-bench needs, into DIR/llama.cpp.tar.gz (default
# .gpu): the peer of the GPU benchmark (scripts/cuda/gpu-bench.sh builds
# it there with CUDA on and sm_90 only). Nothing of it is committed.
#
#   scripts/cuda/llamacpp-src.sh [DIR]
#
# With SPEC=1 it keeps examples/speculative-simple instead of llama-bench
# (the peer of scripts/cuda/gpu-spec.sh), in DIR/llama.cpp-spec.tar.gz.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.gpu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dir"
(cd "$tmp" && npm pack --silent node-llama-cpp@3.21.1 >/dev/null && tar xzf node-llama-cpp-3.21.1.tgz)
git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/llama.cpp"
src=$tmp/llama.cpp
rm -rf "$src/.git" "$src/models" "$src/docs" "$src/examples" "$src/tests" "$src/media" "$src/app" "$src/gguf-py" "$src/pocs" "$src/benches" "$src/skills"
for b in metal sycl vulkan opencl hexagon et cann musa hip kompute rpc webgpu zdnn blas; do rm -rf "$src/ggml/src/ggml-$b"; done
if [ "${SPEC:-0}" = 1 ]; then
	git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/full"
	mkdir -p "$src/examples" "$src/pocs"
	cp -r "$tmp/full/examples/speculative-simple" "$src/examples/"
	echo 'add_subdirectory(speculative-simple)' >"$src/examples/CMakeLists.txt"
	: >"$src/pocs/CMakeLists.txt"
	find "$src/tools" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
	: >"$src/tools/CMakeLists.txt"
	out=$dir/llama.cpp-spec.tar.gz
else
	find "$src/tools" -mindepth 1 -maxdepth 1 -type d ! -name llama-bench -exec rm -rf {} +
	echo 'add_subdirectory(llama-bench)' >"$src/tools/CMakeLists.txt"
	out=$dir/llama.cpp.tar.gz
fi
tar czf "$out" -C "$tmp" llama.cpp
du -sh "$out"
