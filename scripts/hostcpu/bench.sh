#!/usr/bin/env bash
# On a host prepared by scripts/hostcpu/prepare.sh (run from the
# repository root there): the CPU's flags, the kernels' tests (the AMX
# ones run where the CPU has AMX int8), the AMX-against-AVX-512 kernel
# benchmark and the float prefill benchmark (VDPBF16PS where the CPU has
# AVX512_BF16), then the engine benchmark on the Qwen2.5-0.5B-shaped
# model of each of QUANTS: muser with MUSER_ISA=avx512 and with AMX, and
# llama.cpp's CPU llama-bench (built here, native flags), alternating,
# THREADS threads. Results go to OUT (default ./hostcpu-out).
#
#   OUT=DIR scripts/hostcpu/bench.sh DIR
#
# Environment: THREADS (2), PROMPTS ("512 2048"), GEN (64), ROUNDS (2),
# QUANTS ("Q8_0"; also BF16, F16, Q4_K_M), PHASES ("test kernels engine").
set -uo pipefail
dir=${1:?usage: bench.sh DIR}
out=${OUT:-$PWD/hostcpu-out}
threads=${THREADS:-2}
prompts=${PROMPTS:-512 2048}
gen=${GEN:-64}
rounds=${ROUNDS:-2}
phases=${PHASES:-test kernels engine}
quants=${QUANTS:-Q8_0}
mkdir -p "$out" /tmp/hostcpu
tar xJf "$dir/bin.txz" -C /tmp/hostcpu
bin=/tmp/hostcpu/bin
{
	date -u
	grep -m1 'model name' /proc/cpuinfo
	nproc
	grep -m1 -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' '
	echo
	grep -m1 '^flags' /proc/cpuinfo
} | tee "$out/cpu.txt"
has() { [[ " $phases " == *" $1 "* ]]; }
if has test; then
	(cd infer/kernels && "$bin/kernels.test" -test.run 'AMX|MultiToken|MatMul|BF16' -test.v 2>&1 | grep -E '^(--- |ok|FAIL|PASS)|amx|skip' | tail -60) | tee "$out/test.txt"
fi
if has kernels; then
	(cd infer/kernels && "$bin/kernels.test" -test.run '^$' -test.bench 'MatMulAMX' -test.benchtime 1s 2>&1) | tee "$out/kernels.txt"
	(cd infer/kernels && "$bin/kernels.test" -test.run '^$' -test.bench 'FloatPrefill/.*/n=512/threads=1/' -test.benchtime 10x 2>&1) | tee "$out/float.txt"
fi
if has engine; then
	if [ ! -x /tmp/lcpcpu/llama.cpp/build/bin/llama-bench ]; then
		mkdir -p /tmp/lcpcpu && tar xzf "$dir/llama.cpp.tar.gz" -C /tmp/lcpcpu
		(cd /tmp/lcpcpu/llama.cpp && cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
			-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
			-DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_HTML=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null &&
			cmake --build build --target llama-bench -j"$(nproc)" >"$out/llama-build.log" 2>&1) || echo "llama.cpp build failed: see llama-build.log"
	fi
	mkdir -p /tmp/hostcpu/models
	for q in $quants; do
		"$bin/paritytool" gen -dir /tmp/hostcpu/models -quants "$q" -shapes qwen2.5-0.5b >/dev/null
	done
	for r in $(seq "$rounds"); do
		for q in $quants; do
			m=/tmp/hostcpu/models/qwen2.5-0.5b-$q-seed1.gguf
			for p in $prompts; do
				for v in avx512 amx; do
					MUSER_ISA=$v "$bin/muser" bench --model "$m" --threads "$threads" --prompt-tokens "$p" --gen-tokens "$gen" --reps 1 --json |
						sed "s/^{/{\"isa\":\"$v\",/" | tee -a "$out/engine.jsonl"
				done
				# prefill of P tokens, then decode of GEN tokens after P tokens of
				# context (-d), the depth at which muser bench decodes
				/tmp/lcpcpu/llama.cpp/build/bin/llama-bench -m "$m" -t "$threads" -p "$p" -n 0 -r 1 -o jsonl 2>/dev/null | tee -a "$out/llama.jsonl"
				/tmp/lcpcpu/llama.cpp/build/bin/llama-bench -m "$m" -t "$threads" -p 0 -n "$gen" -d "$p" -r 1 -o jsonl 2>/dev/null | tee -a "$out/llama.jsonl"
			done
		done
	done
fi
