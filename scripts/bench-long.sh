#!/usr/bin/env bash
# Long-context prefill benchmark (docs/benchmarks.md, "Attention at long
# context"): muser and llama.cpp (node-llama-cpp 3.21.1) prefill one
# sequence of PROMPTS tokens each on the same GGUF file, 2 threads,
# alternating engines ROUNDS times per length so a noisy neighbour hurts
# both alike. OLD=path/to/another/muser adds that binary (e.g. a build of
# an earlier commit) for prompt lengths up to OLDMAX. Each line of the
# output is one run's JSON plus the process's user+system CPU seconds.
#
#   MODEL=scripts/parity/out/models/qwen2.5-0.5b-Q8_0-seed1.gguf scripts/bench-long.sh
#
# Environment: MODEL (required), PROMPTS ("512 2048 8192"), ROUNDS (3),
# GEN (4), THREADS (2), OUT (scripts/parity/out), OLD, OLDMAX (2048).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/scripts/parity/out}
: "${MODEL:?set MODEL to a GGUF file}"
MODEL=$(realpath "$MODEL") # llama.cpp's side runs in scripts/parity
prompts=${PROMPTS:-512 2048 8192}
rounds=${ROUNDS:-3}
gen=${GEN:-4}
threads=${THREADS:-2}
oldmax=${OLDMAX:-2048}
mkdir -p "$out"
(cd "$root/scripts/parity" && { [ -d node_modules ] || npm ci; })
(cd "$root" && go build -o "$out/muser" ./cmd/muser)
cpu() { # runs "$@", appends its CPU seconds to its one-line JSON output
	local t
	t=$(mktemp)
	/usr/bin/time -f '%U %S' -o "$t" "$@" >"$t.out"
	read -r u s <"$t"
	sed "s/}\$/, \"cpu_s\": $(echo "$u + $s" | bc)}/" "$t.out"
	rm -f "$t" "$t.out"
}
echo "# $(date -u +%FT%TZ) $(uptime)"
for p in $prompts; do
	for r in $(seq "$rounds"); do
		cpu "$out/muser" bench --model "$MODEL" --threads "$threads" --prompt-tokens "$p" --gen-tokens "$gen" --reps 1 --json
		if [ -n "${OLD:-}" ] && [ "$p" -le "$oldmax" ]; then
			cpu "$OLD" bench --model "$MODEL" --threads "$threads" --prompt-tokens "$p" --gen-tokens "$gen" --reps 1 --json | sed 's/"engine": *"[^"]*"/"engine": "muser (old)"/'
		fi
		(cd "$root/scripts/parity" && cpu node engine-bench.mjs "$MODEL" "$threads" "$p" "$gen" 1)
		echo "# $(uptime)"
	done
done
