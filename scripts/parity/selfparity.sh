#!/usr/bin/env bash
# llama.cpp against itself: how often two builds or batchings of the same
# llama.cpp (node-llama-cpp 3.21.1) pick the same top-1 token on the
# random-weight parity models, measured exactly as parity.sh measures
# muser against llama.cpp. It puts parity.sh's figures in proportion: a
# rate that llama.cpp does not reach against itself is rounding noise,
# not a defect of either engine. Writes the "selfparity" table in
# docs/engine.md.
#
#   scripts/parity/selfparity.sh                    # Q8_0 and Q4_K, 3 shapes (about 40 min on 2 cores)
#   ONLY=qwen2.5-0.5b-Q4_K scripts/parity/selfparity.sh
#
# For each model it records llama.cpp's log-probabilities three times over
# the tokens parity.sh uses:
#   ref   32 tokens per evaluation (parity.sh's reference), best CPU build
#         (on an AVX-512 machine the zen4/icelake/... build);
#   b1    one token per evaluation (llama.cpp's decode path), same build;
#   avx2  32 tokens per evaluation with the AVX2 ("haswell") CPU build,
#         from a copy of node_modules holding no AVX-512 build.
# compares b1 and avx2 with ref (paritytool refvs), and runs muser against
# b1 and avx2 (paritytool compare; muser against ref is parity.sh's table).
#
# Environment: OUT (work directory, default scripts/parity/out; it shares
# the generated models with parity.sh), THREADS (default 2), QUANTS
# (default "Q8_0 Q4_K"), RESUME=1 to reuse log-probability files left in
# OUT. Each run rewrites the whole table from its own results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$here/out}
threads=${THREADS:-2}
quants=${QUANTS:-Q8_0 Q4_K}
mkdir -p "$out/models"
cd "$here"
[ -d node_modules ] || npm ci
(cd "$root" && go build -o "$out/paritytool" ./scripts/parity/paritytool)
tool=$out/paritytool
"$tool" gen -dir "$out/models" -quants "$(echo $quants | tr ' ' ,)"

# The AVX2 copy: node-llama-cpp loads the best CPU build it finds beside
# libggml, so a tree without the AVX-512 (and AVX-VNNI) builds loads
# libggml-cpu-haswell.so.
avx2=$out/nlc-avx2
if [ ! -f "$avx2/logits.mjs" ]; then
	rm -rf "$avx2" && mkdir -p "$avx2/node_modules/@node-llama-cpp"
	for d in node_modules/* node_modules/.[!.]*; do
		[ -e "$d" ] || continue
		[ "$(basename "$d")" = @node-llama-cpp ] && continue
		cp -a "$d" "$avx2/node_modules/"
	done
	cp -a node_modules/@node-llama-cpp/linux-x64 "$avx2/node_modules/@node-llama-cpp/"
	bins=$avx2/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
	for v in zen4 icelake skylakex cannonlake cascadelake cooperlake sapphirerapids alderlake; do
		rm -f "$bins/libggml-cpu-$v.so"
	done
	cp logits.mjs package.json "$avx2/"
fi

declare -A what=([b1]="1 token/eval" [avx2]="AVX2 build")
results=$out/selfparity.jsonl
: > "$results"
logits() { # DIR CHUNK MODEL TOKENS OUTFILE
	if [ -n "${RESUME:-}" ] && [ -s "$5" ]; then return; fi
	(cd "$1" && CHUNK=$2 node logits.mjs "$3" "$4" "$5.tmp" "$threads")
	mv "$5.tmp" "$5"
}
for s in llama-3.2-1b qwen2.5-0.5b qwen3-0.6b; do
	for q in $quants; do
		name=$s-$q-seed1
		m=$out/models/$name.gguf
		if [ -n "${ONLY:-}" ] && [[ "$name" != *"$ONLY"* ]]; then continue; fi
		echo "== $name"
		"$tool" tokens -model "$m" -n 512 -out "$out/$name.tokens.json"
		logits "$here" 32 "$m" "$out/$name.tokens.json" "$out/$name.ref.bin"
		logits "$here" 1 "$m" "$out/$name.tokens.json" "$out/$name.b1.bin"
		logits "$avx2" 32 "$m" "$out/$name.tokens.json" "$out/$name.avx2.bin"
		for v in b1 avx2; do
			"$tool" refvs -a "$out/$name.$v.bin" -b "$out/$name.ref.bin" -tokens "$out/$name.tokens.json" \
				-label "$name: llama.cpp ${what[$v]} vs llama.cpp" | tee -a "$results"
		done
		# muser against the two other llama.cpp runs (against ref it is
		# parity.sh's table).
		for v in b1 avx2; do
			"$tool" compare -model "$m" -tokens "$out/$name.tokens.json" -ref "$out/$name.$v.bin" -threads "$threads" \
				-label "$name: muser vs llama.cpp ${what[$v]}" | tee -a "$results"
		done
	done
done
"$tool" report -in "$results" -doc "$root/docs/engine.md" -mark selfparity
echo "results: $results; table written to docs/engine.md"
