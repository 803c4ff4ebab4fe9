#!/usr/bin/env bash
# Extracts the llama.cpp source that node-llama-cpp 3.21.1 ships
# (llama/gitRelease.bundle, tag v0.4.0) from the npm registry, pruned to
# what its CUDA llama-bench needs, into DIR/llama.cpp.tar.gz (default
# .gpu): the peer of the GPU benchmark (scripts/cuda/gpu-bench.sh builds
# it there with CUDA on and sm_90 only). Nothing of it is committed.
#
#   scripts/cuda/llamacpp-src.sh [DIR]
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
find "$src/tools" -mindepth 1 -maxdepth 1 -type d ! -name llama-bench -exec rm -rf {} +
echo 'add_subdirectory(llama-bench)' > "$src/tools/CMakeLists.txt"
tar czf "$dir/llama.cpp.tar.gz" -C "$tmp" llama.cpp
du -sh "$dir/llama.cpp.tar.gz"
