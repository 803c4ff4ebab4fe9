#!/usr/bin/env bash
# Fills .carry/ (git-ignored, at the repository root) with everything the
# GPU run needs: corpusgen and quantize built for linux/amd64, the held-out
# sets, the chat template and the training scripts, and with TARGET=FILE
# the target a block drafter is trained for (copied to .carry/target.gguf).
# Then, through the device tool with carry [".carry"]:
#   bash .carry/run-device.sh default 360
#   bash .carry/run-device-blockdraft.sh 300      (prepared with TARGET)
set -euo pipefail
cd "$(dirname "$0")/../../.."
rm -rf .carry
mkdir -p .carry
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
go build -trimpath -ldflags="-s -w" -o .carry/corpusgen ./infer/defaultmodel/recipe/corpusgen
go build -trimpath -ldflags="-s -w" -o .carry/quantize ./infer/defaultmodel/recipe/quantize
.carry/corpusgen -eval .carry/eval.json
.carry/corpusgen -tool-eval .carry/tool-eval.json
.carry/corpusgen -template .carry/chat_template.jinja
cp infer/defaultmodel/recipe/train/{train.py,blockdraft.py,model.py,tok.py,ggufw.py,evalcheck.py,run-device.sh,run-device-blockdraft.sh,tokenizer.model} .carry/
if [ -n "${TARGET:-}" ]; then cp "$TARGET" .carry/target.gguf; fi
ls -l .carry
du -sh .carry
