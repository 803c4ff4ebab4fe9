#!/usr/bin/env bash
# Builds, on this machine, what scripts/cuda/gpu-spec.sh and
# scripts/cuda/gpu-blockdraft.sh run on the GPU machine (no Go toolchain
# there): muser (xz), the target model (xz), the prompt texts cut to
# exactly 2,048 and 8,192 tokens, and llama.cpp's speculative-simple
# source (scripts/cuda/llamacpp-src.sh with SPEC=1; LLAMACPP=0 leaves it
# out); with BLOCK=FILE the block drafter (xz) and the GPU test binaries
# of the block lane (tests.tar.xz), into DIR (default .gpuspec; add it to
# .git/info/exclude). The device tool carries at most 64 MiB with the
# tree: a Q4_K target (about 22 MB) fits beside the rest, a Q8_0 one of
# this size does not.
#
#   TARGET=long-q4_k.gguf STORIES=stories.txt scripts/cuda/spec-prepare.sh [DIR]
#   TARGET=long-q4_k.gguf STORIES=stories.txt BLOCK=long-blockdraft-q8_0.gguf LLAMACPP=0 scripts/cuda/spec-prepare.sh [DIR]
#
# STORIES is the target's own stories (scripts/bench-draft.sh writes them
# under scripts/parity/out/draft/); the code text is muser's Go source.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.gpuspec}
target=$(realpath "${TARGET:?TARGET names the target GGUF}")
stories=$(realpath "${STORIES:?STORIES names a text the target wrote}")
mkdir -p "$dir/txt"
cd "$root"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$dir/muser" ./cmd/muser
muser=$dir/muser
cat serve/*.go store/*.go pack/*.go >"$dir/code.txt"
for f in "stories:$stories" "code:$dir/code.txt"; do
	name=${f%%:*}
	read -ra ids <<<"$("$muser" tokenize --model "$target" <"${f#*:}")"
	for n in 2048 8192; do
		# BOS and n-1 tokens: detokenized, the text tokenizes to n again.
		"$muser" detokenize --model "$target" "${ids[@]:1:n-2}" >"$dir/txt/$name-$n.txt"
		got=$("$muser" tokenize --model "$target" <"$dir/txt/$name-$n.txt" | wc -w)
		[ "$got" = "$n" ] || { echo "$name-$n.txt tokenizes to $got tokens, not $n" >&2; exit 1; }
	done
done
rm "$dir/code.txt"
xz -T0 -9 -f "$muser"
xz -T0 -6 -c "$target" >"$dir/target.gguf.xz"
if [ -n "${BLOCK:-}" ]; then
	xz -T0 -6 -c "$BLOCK" >"$dir/block.gguf.xz"
	mkdir -p "$dir/tests"
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/tests/cuda.test" ./infer/engine/cuda
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/tests/draftlane.test" ./serve/draftlane
	tar cJf "$dir/tests.tar.xz" -C "$dir" tests && rm -r "$dir/tests"
fi
if [ "${LLAMACPP:-1}" = 1 ]; then SPEC=1 "$root/scripts/cuda/llamacpp-src.sh" "$dir"; fi
du -sh "$dir"/*
