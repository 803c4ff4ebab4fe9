#!/usr/bin/env bash
# One device call's worth of final evidence for the CUDA backend, on a GPU
# machine, from the binaries scripts/cuda/gpu-prepare.sh DIR built:
# gpu-check.sh with SHORT=1 (unit suites, goldens, whole-model Merkle
# roots), one `muser bench --profile` at 8,192 tokens (PROF to change),
# then gpu-bench.sh with PHASES="muser remote" (PHASES to change). With
# llamacpp among the PHASES, llama.cpp's CUDA build runs while the
# correctness suites do (nothing timed runs beside it), so the peer is
# measured in the same call. Every log goes into $OUT/logs.tgz (the
# device tool returns at most 8 files).
#
# Usage (repository root): OUT=DIR2 scripts/cuda/gpu-final.sh DIR
set -u
dir=${1:?usage: gpu-final.sh DIR}
export SHORT=1
real=${OUT:-$PWD/gpu-out}
mkdir -p "$real"
export OUT=$(mktemp -d)
trap 'tar czf "$real/logs.tgz" -C "$OUT" .' EXIT
phases=${PHASES:-muser remote}
lcp=""
case " $phases " in *" llamacpp "*)
	bash scripts/cuda/llamacpp-build.sh "$dir" > "$OUT/llamacpp-build.log" 2>&1 &
	lcp=$!
esac
t0=$SECONDS
timeout "${TCHECK:-220}" bash scripts/cuda/gpu-check.sh "$dir"
echo "check: $((SECONDS - t0)) s"
model=/tmp/muser-gpu/models/qwen2.5-0.5b-Q8_0-seed1.gguf
mkdir -p /tmp/muser-gpu/models
[ -f "$model" ] || /tmp/muser-gpu/bin/paritytool gen -dir /tmp/muser-gpu/models -shapes qwen2.5-0.5b -quants Q8_0 >/dev/null
if [ -n "$lcp" ]; then
	wait "$lcp"; echo "llama.cpp build: exit $? at $((SECONDS - t0)) s"
fi
for p in ${PROF:-8192}; do
	timeout 60 /tmp/muser-gpu/bin/muser bench --device cuda --model "$model" --prompt-tokens "$p" \
		--gen-tokens 32 --reps 1 --profile >"$OUT/profile-$p.txt" 2>&1
	head -22 "$OUT/profile-$p.txt"
done
t0=$SECONDS
PHASES="$phases" timeout "${TBENCH:-300}" bash scripts/cuda/gpu-bench.sh "$dir"
echo "bench: $((SECONDS - t0)) s"
