#!/usr/bin/env bash
# Engine parity with llama.cpp (node-llama-cpp 3.21.1): for stories260K and
# random-weight models with the exact shapes of Llama-3.2-1B, Qwen2.5-0.5B
# and Qwen3-0.6B in F16, Q8_0 and Q4_K, run 512 teacher-forced positions
# through both and compare next-token distributions (top-1 agreement,
# relative logit error, reference margins). Writes the table in
# docs/engine.md ("Parity with llama.cpp").
#
#   scripts/parity/parity.sh            # everything (about an hour on 2 cores)
#   ONLY=qwen2.5-0.5b-Q8_0 scripts/parity/parity.sh   # models whose name contains ONLY
#
# Environment: OUT (work directory, default scripts/parity/out: generated
# models, ~9 GB, and reference files), THREADS (default 2), FLASH_ATTN=1 to
# compare against llama.cpp's flash-attention path instead (results go to
# the second table), RESUME=1 to keep earlier results, skip models already
# in them and reuse reference files left by an interrupted run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$here/out}
threads=${THREADS:-2}
fa=${FLASH_ATTN:-0}
mkdir -p "$out/models"
cd "$here"
[ -d node_modules ] || npm ci
(cd "$root" && go build -o "$out/paritytool" ./scripts/parity/paritytool)
tool=$out/paritytool
"$tool" gen -dir "$out/models"

models=("$root/../shared/models/stories260K.gguf")
for s in llama-3.2-1b qwen2.5-0.5b qwen3-0.6b; do
	for q in F16 Q8_0 Q4_K; do
		models+=("$out/models/$s-$q-seed1.gguf")
	done
done
results=$out/results-fa$fa.jsonl
[ -n "${ONLY:-}" ] || [ -n "${RESUME:-}" ] || : > "$results"
for m in "${models[@]}"; do
	name=$(basename "$m" .gguf)
	if [ -n "${ONLY:-}" ] && [[ "$name" != *"$ONLY"* ]]; then continue; fi
	if [ -n "${RESUME:-}" ] && grep -q "\"model\":\"$name.gguf\"" "$results"; then continue; fi
	sampled=
	[[ "$name" == stories* ]] && sampled=-sampled
	echo "== $name"
	"$tool" tokens -model "$m" -n 512 -out "$out/$name.tokens.json" $sampled
	if [ -z "${RESUME:-}" ] || [ ! -s "$out/$name.ref.bin" ]; then
		FLASH_ATTN=$fa node logits.mjs "$m" "$out/$name.tokens.json" "$out/$name.ref.bin.tmp" "$threads"
		mv "$out/$name.ref.bin.tmp" "$out/$name.ref.bin"
	fi
	"$tool" compare -model "$m" -tokens "$out/$name.tokens.json" -ref "$out/$name.ref.bin" -threads "$threads" | tee -a "$results"
	if [[ "$name" == stories* && "$fa" == 0 ]]; then
		"$tool" fixture -tokens "$out/$name.tokens.json" -ref "$out/$name.ref.bin" -vocab 512 -top 32 \
			-out "$root/infer/engine/testdata/parity/stories260K.json"
	fi
	rm -f "$out/$name.ref.bin"
done
mark=parity
[ "$fa" = 1 ] && mark=parity-fa
"$tool" report -in "$results" -doc "$root/docs/engine.md" -mark "$mark"
echo "results: $results; table written to docs/engine.md"
