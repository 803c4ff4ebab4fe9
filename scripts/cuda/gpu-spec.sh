#!/usr/bin/env bash
# Speculative decoding on the GPU machine, muser and llama.cpp in one
# call, from what scripts/cuda/spec-prepare.sh put in DIR: builds
# llama.cpp's CUDA llama-speculative-simple (node-llama-cpp 3.21.1's
# source, sm_90; about 4.5 minutes on 16 cores), then for 2,048 and 8,192
# tokens of context and each text, `muser bench --device cuda` with each
# draft lane of LANES (default "lookup model both"; "block" and
# "lookup+block" take the block drafter spec-prepare.sh put in DIR with
# BLOCK; plain decoding alternates inside each) and llama.cpp's
# speculative-simple with each of LCP_LANES (default "lookup model":
# n-gram lookup, ngram-simple, and the draft model, draft-simple), REPS
# runs each; GEN tokens generated (default 128). The draft model is the
# embedded default model. Everything lands in OUT/specout.tgz.
#
#   OUT=DIR scripts/cuda/gpu-spec.sh DIR
#   GEN=384 LANES="block lookup lookup+block" LCP_LANES=lookup OUT=DIR scripts/cuda/gpu-spec.sh DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
d=$(cd "${1:?usage: gpu-spec.sh DIR}" && pwd)
o=/tmp/specout
mkdir -p $o
trap 'tar czf ${OUT:?}/specout.tgz -C /tmp specout' EXIT
xz -d -k -f -T0 "$d/muser.xz" "$d/target.gguf.xz" && chmod +x "$d/muser"
T=$d/target.gguf
D=$root/infer/defaultmodel/model.gguf
bl=""
[ -f "$d/block.gguf.xz" ] && bl=/tmp/specblock.gguf && xz -dc "$d/block.gguf.xz" >$bl
# shellcheck source=scripts/cuda/draft-lanes.sh
. "$root/scripts/cuda/draft-lanes.sh"
gen=${GEN:-128}
sha256sum "$T" "$D" | tee $o/sha256.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; grep -m1 'model name' /proc/cpuinfo; nproc; } >$o/env.txt
mkdir -p /tmp/lcp && tar xzf "$d/llama.cpp-spec.tar.gz" -C /tmp/lcp
t0=$SECONDS
(cd /tmp/lcp/llama.cpp && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
	-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_HTML=OFF -DCMAKE_BUILD_TYPE=Release >$o/cmake.log 2>&1 &&
	cmake --build build --target llama-speculative-simple -j"$(nproc)" >$o/build.log 2>&1)
echo "llama.cpp build: exit $? after $((SECONDS - t0)) s"
S=/tmp/lcp/llama.cpp/build/bin/llama-speculative-simple
for ctx in 2048 8192; do
	for text in stories code; do
		f=$d/txt/$text-$ctx.txt
		for lane in ${LANES:-lookup model both}; do
			a=$(draft_lane_args "$lane" "$D" "$bl") || exit 2
			# shellcheck disable=SC2086
			timeout 100 "$d/muser" bench --model "$T" --device cuda --prompt-tokens $ctx --gen-tokens $gen --reps 3 \
				--temperature 0 --text "$f" $a --json >>$o/muser.jsonl 2>>$o/muser.err
		done
		for rep in $(seq "${REPS:-2}"); do
			for lane in ${LCP_LANES:-lookup model}; do
				case $lane in lookup) a="--spec-type ngram-simple" ;; model) a="-md $D -ngld 99 --spec-type draft-simple" ;; esac
				# shellcheck disable=SC2086
				timeout 100 $S -m "$T" -f "$f" -c $((ctx + gen + 128)) -b $((ctx + gen + 128)) -n $gen --temp 0 --ignore-eos -ngl 99 $a \
					>$o/lcp-$ctx-$text-$lane-$rep.out 2>$o/lcp-$ctx-$text-$lane-$rep.err
				printf "llama.cpp %s %s %s %s: " $ctx $text $lane "$rep"
				grep -E "decoded|n_drafted|n_accept" $o/lcp-$ctx-$text-$lane-$rep.err | sed 's/.* I //' | tr '\n' ' '
				echo
			done
		done
	done
done
cat $o/muser.jsonl
