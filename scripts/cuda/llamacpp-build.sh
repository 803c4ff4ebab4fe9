#!/usr/bin/env bash
# Builds llama.cpp's CUDA llama-bench (sm_90 only) on a GPU machine from
# the source scripts/cuda/llamacpp-src.sh put in DIR/llama.cpp.tar.gz,
# under /tmp/lcp; nothing to do when it is built already. About 5 minutes
# on 16 cores. The build log goes to stdout.
#
#   scripts/cuda/llamacpp-build.sh DIR
set -eo pipefail
dir=${1:?usage: llamacpp-build.sh DIR}
[ -x /tmp/lcp/llama.cpp/build/bin/llama-bench ] && exit 0
mkdir -p /tmp/lcp && tar xzf "$dir/llama.cpp.tar.gz" -C /tmp/lcp
cd /tmp/lcp/llama.cpp
cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_HTML=OFF -DCMAKE_BUILD_TYPE=Release
cmake --build build --target llama-bench -j"$(nproc)"
