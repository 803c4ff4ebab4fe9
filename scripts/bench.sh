#!/usr/bin/env bash
# The engine benchmark: muser and llama.cpp (node-llama-cpp 3.21.1) on the
# same GGUF files in the same run, 2 threads each, one process per
# measurement so peak RSS is the model's own. For each model the two
# engines alternate ROUNDS times (so a noisy neighbour hurts both alike)
# and the fastest prefill and decode of each are kept. Writes the table
# in docs/benchmarks.md ("Engine: muser vs llama.cpp").
#
#   scripts/bench.sh                   # stories260K and the Llama-3.2-1B, Qwen2.5-0.5B and
#                                      # Qwen3-0.6B shapes at F16, BF16, Q8_0 and Q4_K_M
#                                      # (llama.cpp's mix: Q4_K with Q6_K, Q5_0 and Q8_0)
#   MODELS="a.gguf b.gguf" scripts/bench.sh
#
# Environment: OUT (default scripts/parity/out; random models are
# generated there as by scripts/parity/parity.sh), THREADS (2), PROMPT
# (512), GEN (128), ROUNDS (2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/scripts/parity/out}
threads=${THREADS:-2}
prompt=${PROMPT:-512}
gen=${GEN:-128}
rounds=${ROUNDS:-2}
mkdir -p "$out/models"
(cd "$root/scripts/parity" && { [ -d node_modules ] || npm ci; })
(cd "$root" && go build -o "$out/muser" ./cmd/muser && go build -o "$out/paritytool" ./scripts/parity/paritytool)
if [ -z "${MODELS:-}" ]; then
	"$out/paritytool" gen -dir "$out/models" -quants Q8_0,Q4_K_M,F16,BF16
	MODELS="$root/../shared/models/stories260K.gguf"
	for s in qwen2.5-0.5b qwen3-0.6b llama-3.2-1b; do
		for q in Q8_0 Q4_K_M F16 BF16; do MODELS="$MODELS $out/models/$s-$q-seed1.gguf"; done
	done
fi
results=$out/bench.jsonl
: > "$results"
for m in $MODELS; do
	echo "== $m"
	for r in $(seq "$rounds"); do
		"$out/muser" bench --model "$m" --threads "$threads" --prompt-tokens "$prompt" --gen-tokens "$gen" --reps 1 --json | tee -a "$results"
		(cd "$root/scripts/parity" && node engine-bench.mjs "$m" "$threads" "$prompt" "$gen" 1) | tee -a "$results"
	done
done
"$out/paritytool" benchreport -in "$results" -doc "$root/docs/benchmarks.md" \
	-cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) ($(nproc) cores)" -rounds "$rounds"
echo "results: $results; table written to docs/benchmarks.md"
