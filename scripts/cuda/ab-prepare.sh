#!/usr/bin/env bash
# Builds, on this machine, what scripts/cuda/gpu-ab.sh compares on a GPU
# machine (no Go toolchain there): muser at BASE (a git revision) and at
# the working tree, both stripped and xz-compressed, the target model,
# and optionally a text and a block drafter for a draft lane, into DIR
# (default .gpuab; add it to .git/info/exclude). A kernel change is timed
# against its base in one device call, the two binaries alternating on
# the same GPU.
#
#   TARGET=long-q4_k.gguf [TEXT=stories-2048.txt] [BLOCK=drafter.gguf] \
#     scripts/cuda/ab-prepare.sh BASE [DIR]
#
# The device tool carries at most 64 MiB with the tracked tree: two
# binaries (about 13 MB each) and a Q4_K target of 22 MB fit only if the
# tree leaves out infer/defaultmodel/model.gguf (a throwaway branch whose
# index lacks it); a drafter does not fit beside them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
base=${1:?usage: ab-prepare.sh BASE [DIR]}
dir=${2:-$root/.gpuab}
target=$(realpath "${TARGET:?TARGET names the target GGUF}")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cd "$root"
export CGO_ENABLED=0
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
(cd "$tmp/base" && go build -trimpath -ldflags="-s -w" -o "$dir/muser-base" ./cmd/muser)
go build -trimpath -ldflags="-s -w" -o "$dir/muser-new" ./cmd/muser
git rev-parse "$base" >"$dir/base.rev"
{ git rev-parse HEAD; git status --short; } >"$dir/new.rev"
xz -T0 -9 -f "$dir/muser-base" "$dir/muser-new"
cp "$target" "$dir/target.gguf"
[ -z "${TEXT:-}" ] || cp "$TEXT" "$dir/text.txt"
[ -z "${BLOCK:-}" ] || xz -T0 -6 -c "$BLOCK" >"$dir/block.gguf.xz"
du -cb "$dir"/* | tail -1
