#!/usr/bin/env bash
# Regenerates the CUDA exact-mode kernel artifacts embedded in the muser
# binary (infer/engine/cuda/internal/cukernels) from their sources, on a
# machine with nvcc (CUDA 11.8 or later, which targets sm_90):
#
#   muser_sm90.cubin       nvcc -arch=sm_90 -cubin      (loaded on sm_90)
#   muser_compute90.ptx    nvcc -arch=compute_90 -ptx   (JIT-compiled by the
#                          driver on other GPUs)
#   manifest.txt           the SHA-256 digest of the sources, the nvcc
#                          version, the flags, the digests of both
#                          artifacts and the kernel names
#
# Before installing them it runs the package's artifact checks on the new
# files (go test -run TestArtifacts with MUSER_CUKERNELS_DIR pointing at
# them, nvdisasm required): every float add/sub/mul of the PTX carries an
# explicit rounding mode (no contraction by a JIT), no fused multiply-add
# in PTX or SASS outside the kernels launch.go marks ExactFMA and the
# IEEE division/square-root helpers, no approximate or flush-to-zero math,
# integer tensor cores in every mmq kernel, and every kernel's parameters
# as launch.go passes them. A failed check leaves the old artifacts in
# place and exits non-zero.
#
# Usage: scripts/cuda/build-kernels.sh   (NVCC=/path/to/nvcc to choose one)
#
# No GPU is needed to build. On Debian 12, nvcc 11.8 and nvdisasm come
# with the nvidia-cuda-toolkit package of the non-free component (add
# non-free to the Components of /etc/apt/sources.list.d/debian.sources,
# then apt-get update and apt-get install nvidia-cuda-toolkit).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=infer/engine/cuda/internal/cukernels
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null || { echo "build-kernels: $nvcc not found" >&2; exit 1; }
command -v nvdisasm >/dev/null || { echo "build-kernels: nvdisasm not found (the SASS check needs it)" >&2; exit 1; }

common=(--fmad=false -O3 -std=c++17 -prec-div=true -prec-sqrt=true -ftz=false)
cubin_flags=("${common[@]}" -arch=sm_90 -cubin)
ptx_flags=("${common[@]}" -arch=compute_90 -ptx)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$nvcc" "${cubin_flags[@]}" -o "$tmp/muser_sm90.cubin" "$dir/muser.cu"
"$nvcc" "${ptx_flags[@]}" -o "$tmp/muser_compute90.ptx" "$dir/muser.cu"

# The source digest (manifest.go, SourceDigest): SHA-256 over every *.cu
# and *.cuh file of the package in byte order of their names, each as its
# name, a NUL byte, its size in decimal, a NUL byte, then its bytes.
sources=$(cd "$dir" && ls -- *.cu *.cuh | LC_ALL=C sort)
digest=$(cd "$dir" && for f in $sources; do
	printf '%s\0%d\0' "$f" "$(wc -c <"$f")"
	cat -- "$f"
done | sha256sum | cut -d' ' -f1)
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { wc -c <"$1" | tr -d ' '; }
version=$("$nvcc" --version | grep -E '^Cuda compilation tools' | head -1)

{
	echo "# muser CUDA kernels: written by scripts/cuda/build-kernels.sh; do not edit."
	echo "format 1"
	echo "source-digest sha256:$digest"
	echo "sources $(echo $sources)"
	echo "nvcc $version"
	echo "cubin-flags ${cubin_flags[*]}"
	echo "ptx-flags ${ptx_flags[*]}"
	echo "cubin muser_sm90.cubin sha256:$(sha "$tmp/muser_sm90.cubin") $(size "$tmp/muser_sm90.cubin")"
	echo "ptx muser_compute90.ptx sha256:$(sha "$tmp/muser_compute90.ptx") $(size "$tmp/muser_compute90.ptx")"
	grep -oE '^\.visible \.entry [A-Za-z_][A-Za-z0-9_]*' "$tmp/muser_compute90.ptx" | awk '{print $3}' | LC_ALL=C sort |
		while read -r k; do echo "kernel $k"; done
} >"$tmp/manifest.txt"

echo "== checking the new artifacts"
MUSER_CUKERNELS_DIR="$tmp" MUSER_REQUIRE_NVDISASM=1 go test -count=1 -run '^TestArtifacts$' "./$dir"

cp "$tmp/muser_sm90.cubin" "$tmp/muser_compute90.ptx" "$tmp/manifest.txt" "$dir/"
echo "== installed; checking the embedded copies"
MUSER_REQUIRE_NVDISASM=1 go test -count=1 -run '^(TestArtifacts|TestSourceDigest)$' "./$dir"
echo "OK: $(grep -c '^kernel ' "$dir/manifest.txt") kernels, sources sha256:$digest"
