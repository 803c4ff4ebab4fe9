#!/usr/bin/env bash
# Trains one preset of muser's default model on the GPU machine and leaves
# what comes back in $OUT/PRESET/ (at most 8 files of at most 15 MiB each,
# one folder down, as the device tool returns them):
#
#   train.log, eval.json, report.json   the run's record
#   model-q8_0.gguf[.partNN]            the Q8_0 file (recipe/quantize), split when over 15 MiB
#   model-f32.gguf.partNN               the F32 export, split (default preset only)
#   sha256.txt                          sha256 of the F32 and Q8_0 files before splitting
#
# Usage, from the repository root with .carry/ prepared as ../README.md
# says: bash .carry/run-device.sh [default|large|long] [TRAINING_SECONDS]
set -euo pipefail
preset=${1:-default}
limit=${2:-360}
case $preset in default | large | long) ;; *) echo "preset must be default, large or long, got $preset" >&2; exit 2 ;; esac
out=${OUT:?OUT must name the folder that comes back}/$preset
mkdir -p "$out" /tmp/run-"$preset"
run=/tmp/run-$preset
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
PYTHONUNBUFFERED=1 python3 train.py --preset "$preset" --corpus /tmp/corpus.jsonl --corpusgen ./corpusgen \
	--corpus-seed 1 --corpus-size 500000000 --tokenizer tokenizer.model --eval eval.json \
	--tool-eval tool-eval.json --chat-template chat_template.jinja --out "$run" --compile \
	--time-limit "$limit" --workers "$(nproc)" 2>&1 | tee "$out/train.log"
cp "$run/eval.json" "$run/report.json" "$out/"
./quantize -in "$run/model-f32.gguf" -out "$run/model-q8_0.gguf"
(cd "$run" && sha256sum model-f32.gguf model-q8_0.gguf) | tee "$out/sha256.txt"
ls -l "$run"
split_into() { # file, prefix: copies file whole when small, else in 15 MiB parts
	if [ "$(stat -c %s "$1")" -le $((15 << 20)) ]; then cp "$1" "$2"; else split -b 15M -d "$1" "$2.part"; fi
}
split_into "$run/model-q8_0.gguf" "$out/model-q8_0.gguf"
if [ "$preset" = default ]; then split -b 15M -d "$run/model-f32.gguf" "$out/model-f32.gguf.part"; fi
ls -l "$out"
