#!/usr/bin/env bash
# Speculative-decoding benchmark (docs/benchmarks.md, "Speculative
# decoding"): `muser bench --draft-lookup`, `--draft-model` and
# `--draft-block` on TARGET (default: the embedded default model, Q8_0)
# with DRAFT as the draft model (default: TARGET re-quantized to Q4_K) and
# BLOCK as the block drafter (trained for TARGET by the default model's
# recipe; the block lanes need it), for each context length in CTXS and
# each text:
#   stories  text TARGET itself wrote (muser run, seeds 1..N,
#            temperature 0.8), so the context is in its own distribution;
#   code     muser's own Go source (serve/, store/, pack/), structured text.
# Each run alternates plain and drafted decoding REPS times and reports the
# fastest of each; it fails if the outputs differ. When node-llama-cpp is
# installed under scripts/parity (npm ci --prefix scripts/parity),
# scripts/parity/spec-engine-bench.mjs runs the same protocol on llama.cpp
# with the same TARGET and DRAFT files (speculative decoding with a draft
# model, driven at llama.cpp's decode level). One JSON object per line.
#
#   scripts/bench-draft.sh
#   TARGET=long-q8_0.gguf DRAFT=infer/defaultmodel/model.gguf scripts/bench-draft.sh
#   TARGET=long-q8_0.gguf DRAFT=infer/defaultmodel/model.gguf BLOCK=long-blockdraft-q8_0.gguf \
#     LANES="lookup model block lookup+block" scripts/bench-draft.sh
#
# Environment: TARGET (infer/defaultmodel/model.gguf), DRAFT (TARGET as
# Q4_K), CTXS ("2048 8192"), GEN (128), REPS (3), THREADS (2), TEMP (0),
# LANES ("lookup model both"; both: lookup first, the draft model where
# it finds nothing; block: the block drafter; lookup+block: lookup first,
# the block drafter where it finds nothing), BLOCK, OUT (scripts/parity/out), NODE (1: run llama.cpp
# too when installed), NODE_DRAFT_MAX (16) and NODE_P_MIN (0.75):
# llama.cpp's --draft-max and --draft-p-min defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/cuda/draft-lanes.sh
. "$root/scripts/cuda/draft-lanes.sh"
out=${OUT:-$root/scripts/parity/out}
ctxs=${CTXS:-2048 8192}
gen=${GEN:-128}
reps=${REPS:-3}
threads=${THREADS:-2}
temp=${TEMP:-0}
target=$(realpath "${TARGET:-$root/infer/defaultmodel/model.gguf}")
# The draft model and the stories are TARGET's: kept per target file.
work=$out/draft/$(sha256sum "$target" | cut -c1-12)
mkdir -p "$work"
(cd "$root" && go build -o "$out/muser" ./cmd/muser)
muser=$out/muser
if [ -n "${DRAFT:-}" ]; then
	draft=$(realpath "$DRAFT")
else
	draft=$work/q4k.gguf
	[ -f "$draft" ] || "$muser" quantize --type Q4_K "$target" "$draft" >&2
fi
stories=$work/stories.txt
maxctx=0
for c in $ctxs; do [ "$c" -gt "$maxctx" ] && maxctx=$c; done
ntok() { "$muser" tokenize --model "$target" <"$1" | wc -w; }
if [ ! -f "$stories" ] || [ "$(ntok "$stories")" -le "$maxctx" ]; then
	# The model's stories end after about 100 tokens: as many seeds as it
	# takes to pass the longest context.
	: >"$stories.tmp"
	seed=1
	while [ "$(ntok "$stories.tmp")" -le "$maxctx" ]; do
		for s in $(seq "$seed" $((seed + 19))); do
			"$muser" run --model "$target" --no-cache --seed "$s" --temperature 0.8 --max-tokens 480 -p "Once upon a time" 2>/dev/null
			echo
		done >>"$stories.tmp"
		seed=$((seed + 20))
	done
	mv "$stories.tmp" "$stories"
fi
code=$work/code.txt
[ -f "$code" ] || cat "$root"/serve/*.go "$root"/store/*.go "$root"/pack/*.go >"$code"
echo "# $(date -u +%FT%TZ) $(uptime)"
for ctx in $ctxs; do
	for text in "$stories" "$code"; do
		for lane in ${LANES:-lookup model both}; do
			lane=$(draft_lane_args "$lane" "$draft" "${BLOCK:-}") || exit 2
			# shellcheck disable=SC2086
			"$muser" bench --model "$target" --threads "$threads" --prompt-tokens "$ctx" --gen-tokens "$gen" \
				--reps "$reps" --temperature "$temp" --text "$text" $lane --json
		done
		if [ "${NODE:-1}" = 1 ] && [ -d "$root/scripts/parity/node_modules/node-llama-cpp" ]; then
			node "$root/scripts/parity/spec-engine-bench.mjs" "$target" "$draft" "$text" "$threads" "$ctx" "$gen" "$reps" \
				"${NODE_DRAFT_MAX:-16}" "${NODE_P_MIN:-0.75}"
		fi
	done
done
