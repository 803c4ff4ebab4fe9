#!/usr/bin/env bash
# Trains the block drafter of a target of the default model's family on the
# GPU machine (train/blockdraft.py) and leaves what comes back in
# $OUT/blockdraft/ (at most 8 files of at most 15 MiB each):
#
#   train.log, report.json, vectors.json   the run's record
#   drafter-q8_0.gguf                      the drafter (recipe/quantize)
#   drafter-f32.gguf.partNN                the F32 export, split
#   sha256.txt                             sha256 of the F32 and Q8_0 files before splitting
#
# Usage, from the repository root with .carry/ prepared by
# TARGET=FILE ../prepare-carry.sh (which copies the target to
# .carry/target.gguf): bash .carry/run-device-blockdraft.sh [TRAINING_SECONDS [ARGS...]]
# Each step trains on 2 corpus windows and 8 windows the target wrote
# (blockdraft.py --rollout-windows); ARGS go to blockdraft.py after these.
set -euo pipefail
limit=${1:-300}
shift || true
out=${OUT:?OUT must name the folder that comes back}/blockdraft
run=/tmp/run-blockdraft
mkdir -p "$out" "$run"
cd "$(dirname "$0")"
[ -f target.gguf ] || { echo "target.gguf is missing: prepare .carry with TARGET=FILE" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
PYTHONUNBUFFERED=1 python3 blockdraft.py --target target.gguf --corpus /tmp/corpus.jsonl --corpusgen ./corpusgen \
	--corpus-seed 1 --corpus-size 200000000 --tokenizer tokenizer.model --out "$run" --compile \
	--time-limit "$limit" --workers "$(nproc)" --windows 2 --rollout-windows 8 "$@" 2>&1 | tee "$out/train.log"
cp "$run/report.json" "$run/vectors.json" "$out/"
./quantize -in "$run/drafter-f32.gguf" -out "$run/drafter-q8_0.gguf"
(cd "$run" && sha256sum drafter-f32.gguf drafter-q8_0.gguf) | tee "$out/sha256.txt"
cp "$run/drafter-q8_0.gguf" "$out/"
split -b 15M -d "$run/drafter-f32.gguf" "$out/drafter-f32.gguf.part"
ls -l "$out"
