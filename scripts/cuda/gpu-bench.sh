#!/usr/bin/env bash
# The GPU benchmark, on a GPU machine, from what scripts/cuda/gpu-prepare.sh
# (binaries) and scripts/cuda/llamacpp-src.sh (the peer's source) put in
# DIR. Phases (PHASES, default all): muser (muser bench --device cuda on
# the Qwen2.5-0.5B-shaped Q8_0 model: prefill 2048, 8192, 32768; decode at
# depth 0, 2048, 8192 and 32768, then depth 0 and 8192 again with
# --cuda-graphs=false), llamacpp (llama.cpp's CUDA build from
# node-llama-cpp 3.21.1's source, sm_90 only, unless built already;
# llama-bench with flash attention on the same file, the same cells),
# torch (a bf16 PyTorch prefill of the same shape), remote (a GPU
# producer for CPU consumers: cmd/muser's TestE2ERemotePrefill with the
# producer on the GPU, and servebench -remote's time to first token at
# 8192 against a local CPU prefill). JSON lines and logs go to OUT.
#
#   PHASES="muser llamacpp" scripts/cuda/gpu-bench.sh DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(cd "${1:?usage: gpu-bench.sh DIR}" && pwd)
out=${OUT:-$PWD/gpu-out}
phases=${PHASES:-muser llamacpp torch remote}
mkdir -p "$out" /tmp/muser-gpu/models
[ -d /tmp/muser-gpu/bin ] || tar xzf "$dir/bin.tgz" -C /tmp/muser-gpu
bin=/tmp/muser-gpu/bin
[ -e "$root/../shared" ] || ln -s "$dir/shared" "$root/../shared"
model=/tmp/muser-gpu/models/qwen2.5-0.5b-Q8_0-seed1.gguf
[ -f "$model" ] || "$bin/paritytool" gen -dir /tmp/muser-gpu/models -shapes qwen2.5-0.5b -quants Q8_0 > /dev/null
has() { case " $phases " in *" $1 "*) return 0;; esac; return 1; }
if has llamacpp; then
	# Not in the background of the other phases: the build loads every
	# core, and muser's decode timing needs its host thread.
	echo "== llama.cpp CUDA build"
	t0=$SECONDS
	bash "$root/scripts/cuda/llamacpp-build.sh" "$dir" >> "$out/llamacpp-build.log" 2>&1
	echo "build exit $? after $((SECONDS - t0)) s"; tail -2 "$out/llamacpp-build.log"
fi
run_muser() {
	for spec in 2048:16:2 8192:128:2 32768:16:1 2:128:2; do
		IFS=: read -r p g r <<< "$spec"
		"$bin/muser" bench --device cuda --model "$model" --prompt-tokens "$p" --gen-tokens "$g" --reps "$r" --json | tee -a "$out/bench.jsonl"
	done
	# Decode with every kernel launched from the host, for comparison with
	# the graphs above (GRAPHS_OFF=0 skips it).
	[ "${GRAPHS_OFF:-1}" = 1 ] || return 0
	for spec in 8192:128:2 2:128:2; do
		IFS=: read -r p g r <<< "$spec"
		"$bin/muser" bench --device cuda --cuda-graphs=false --model "$model" --prompt-tokens "$p" --gen-tokens "$g" --reps "$r" --json | tee -a "$out/bench.jsonl"
	done
}
run_llamacpp() {
	lb=/tmp/lcp/llama.cpp/build/bin/llama-bench
	[ -x "$lb" ] || { echo "llama-bench was not built"; return; }
	"$lb" -m "$model" -p 2048,8192,32768 -n 0 -fa 1 -r 2 -o jsonl | tee -a "$out/bench.jsonl"
	"$lb" -m "$model" -p 0 -n 128 -d 0,2048,8192,32768 -fa 1 -r 2 -o jsonl | tee -a "$out/bench.jsonl"
}
if has muser; then echo "== muser"; run_muser; fi
if has llamacpp; then echo "== llama.cpp"; run_llamacpp; fi
if has torch; then echo "== torch"; python3 "$root/scripts/cuda/torch-prefill.py" 2048 8192 32768 | tee -a "$out/bench.jsonl"; fi
if has remote; then
	echo "== remote prefill: GPU producer, CPU consumer and local reference (byte for byte)"
	(cd "$root/cmd/muser" && MUSER_E2E_BIN=$bin/muser MUSER_E2E_PRODUCER_DEVICE=cuda "$bin/cmd.test" \
		-test.run 'TestE2ERemotePrefill$' -test.v) > "$out/remote-e2e.log" 2>&1
	echo "exit $?"; grep -E '^(--- |ok|FAIL|PASS)' "$out/remote-e2e.log"
	echo "== time to first token at 8192: GPU producer vs local CPU prefill"
	"$bin/servebench" -remote -muser "$bin/muser" -model "$model" -depths 8192 -consumers 2 -producer-device cuda \
		-threads "$(nproc)" > "$out/remote-ttft.md" 2> "$out/remote-ttft.log"
	echo "exit $?"; cat "$out/remote-ttft.md"
fi
