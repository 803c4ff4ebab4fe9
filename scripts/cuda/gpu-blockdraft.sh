#!/usr/bin/env bash
# The block draft lane on the GPU machine, in one call, from what
# scripts/cuda/spec-prepare.sh (with BLOCK=FILE) put in DIR: the GPU tests
# of the block drafter (the GPU drafter's logits against the CPU's, bit
# for bit; the lane's output against plain decoding), the drafter's call
# on the GPU against the host's CPU (BenchmarkGPUBlockDraft), then for
# 2,048 and 8,192 tokens of context and each text `muser bench --device
# cuda` with the block lane on the GPU (--draft-block-device model), the
# block lane on the CPU, prompt lookup, and lookup chained before the block
# lane on the GPU (plain decoding alternates inside each run), REPS
# repetitions (default 3) of GEN generated tokens (default 128) each.
# Everything lands in OUT/blockout.tgz. A file already
# in DIR uncompressed (muser, target.gguf, block.gguf) is used as it is;
# without tests.tar.xz the tests and the call benchmark are left out.
#
#   OUT=DIR [REPS=3] [GEN=128] scripts/cuda/gpu-blockdraft.sh DIR
set -uo pipefail
d=$(cd "${1:?usage: gpu-blockdraft.sh DIR}" && pwd)
o=/tmp/blockout
mkdir -p $o
trap 'tar czf ${OUT:?}/blockout.tgz -C /tmp blockout' EXIT
for f in muser target.gguf block.gguf; do
	[ -f "$d/$f" ] || xz -d -k -f -T0 "$d/$f.xz"
done
chmod +x "$d/muser"
T=$d/target.gguf
B=$d/block.gguf
sha256sum "$T" "$B" | tee $o/sha256.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; grep -m1 'model name' /proc/cpuinfo; nproc; } | tee $o/env.txt
if [ -f "$d/tests.tar.xz" ]; then
	tar xJf "$d/tests.tar.xz" -C /tmp
	export MUSER_REQUIRE_CUDA=1
	(cd /tmp/tests && ./cuda.test -test.run 'GPUBlockDrafter' -test.v -test.count 1 >$o/test-cuda.txt 2>&1; echo "cuda.test: exit $?")
	(cd /tmp/tests && ./draftlane.test -test.run 'GPU|BlockDrafterOnDevice' -test.v -test.count 1 >$o/test-draftlane.txt 2>&1; echo "draftlane.test: exit $?")
	grep -E "^(--- |ok|FAIL|PASS)" $o/test-*.txt
	(cd /tmp/tests && ./cuda.test -test.run '^$' -test.bench BenchmarkGPUBlockDraft -test.count 3 >$o/bench-draft.txt 2>&1)
	grep -E "^Benchmark" $o/bench-draft.txt
fi
for ctx in 2048 8192; do
	for text in stories code; do
		f=$d/txt/$text-$ctx.txt
		for lane in block block-cpu lookup lookup+block; do
			case $lane in
			block) a="--draft-block $B --draft-block-device model" ;;
			block-cpu) a="--draft-block $B --draft-block-device cpu --threads $(nproc)" ;;
			lookup) a=--draft-lookup ;;
			lookup+block) a="--draft-lookup --draft-block $B --draft-block-device model" ;;
			esac
			# shellcheck disable=SC2086
			timeout 100 "$d/muser" bench --model "$T" --device cuda --prompt-tokens $ctx --gen-tokens "${GEN:-128}" --reps "${REPS:-3}" \
				--temperature 0 --text "$f" $a --json >>$o/muser.jsonl 2>>$o/muser.err || echo "$ctx $text $lane: exit $?" | tee -a $o/muser.err
		done
	done
done
cat $o/muser.jsonl
