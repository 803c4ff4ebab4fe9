#!/usr/bin/env bash
# Runs the GPU tests and the whole-model evidence on a GPU machine, from
# the binaries scripts/cuda/gpu-prepare.sh built into DIR, and writes the
# logs under OUT (default ./gpu-out).
#
#   scripts/cuda/gpu-check.sh DIR
# Environment: OUT; SHORT=1 samples the kernels' exhaustive sweeps;
# EVIDENCE_TOKENS (2048) for TestGPUEvidencePrefill; SKIP_EVIDENCE=1.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(cd "${1:?usage: gpu-check.sh DIR}" && pwd)
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out" /tmp/muser-gpu/bin
tar xzf "$dir/bin.tgz" -C /tmp/muser-gpu
bin=/tmp/muser-gpu/bin
# The tests read ../shared beside the checkout.
[ -e "$root/../shared" ] || ln -s "$dir/shared" "$root/../shared"
export MUSER_REQUIRE_CUDA=1
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
	grep -m1 'model name' /proc/cpuinfo; nproc
	grep -o -w -E 'avx512f|avx512_vnni|avx512bw|amx_int8|amx_tile|avx2' /proc/cpuinfo | sort | uniq -c
} > "$out/env.txt" 2>&1
short=""
[ "${SHORT:-0}" = 1 ] && short="-test.short"
step() { # name, package dir, command...
	local name=$1 pkg=$2; shift 2
	echo "== $name"
	local t0=$SECONDS
	(cd "$root/$pkg" && "$@") > "$out/$name.log" 2>&1
	echo "exit $? after $((SECONDS - t0)) s" >> "$out/$name.log"
	tail -3 "$out/$name.log"
}
step cu infer/engine/cuda/internal/cu "$bin/cu.test" -test.run GPU -test.v
step cukernels infer/engine/cuda/internal/cukernels "$bin/cukernels.test" -test.run GPU -test.v $short
step cuda infer/engine/cuda "$bin/cuda.test" -test.run 'GPU' -test.v
if [ "${SKIP_EVIDENCE:-0}" != 1 ]; then
	mkdir -p /tmp/muser-gpu/models
	MUSER_GPU_EVIDENCE=/tmp/muser-gpu/models MUSER_GPU_EVIDENCE_TOKENS=${EVIDENCE_TOKENS:-2048} \
		step evidence infer/engine/cuda "$bin/cuda.test" -test.run GPUEvidence -test.v -test.timeout 20m
fi
grep -h -E '^(--- FAIL|FAIL|ok|PASS)|EVIDENCE' "$out"/*.log | head -100
if [ "${BENCH:-0}" = 1 ] && [ -f /tmp/muser-gpu/models/qwen2.5-0.5b-Q8_0-seed1.gguf ]; then
	for p in 2048 8192; do
		step bench-q8_0-$p . "$bin/muser" bench --device cuda --model /tmp/muser-gpu/models/qwen2.5-0.5b-Q8_0-seed1.gguf \
			--prompt-tokens $p --gen-tokens 64 --reps 2 --json
	done
	cat "$out"/bench-*.log
fi
