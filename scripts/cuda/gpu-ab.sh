#!/usr/bin/env bash
# Times two muser binaries against each other on a GPU machine, from what
# scripts/cuda/ab-prepare.sh put in DIR: for each context length in CTXS
# (default "2048 8192"), ROUNDS rounds (default 2) of `muser bench
# --device cuda` plain prefill and decode, base and new alternating (the
# order flipped each round); with a text and a drafter, the block lane
# too; then, where ncu runs, each binary's decode kernels one by one
# (device time per launch, grouped by kernel and grid). Everything lands
# in OUT/ab.tgz; a summary is printed.
#
#   OUT=DIR2 scripts/cuda/gpu-ab.sh DIR
set -uo pipefail
d=$(cd "${1:?usage: gpu-ab.sh DIR}" && pwd)
o=/tmp/about
rm -rf $o /tmp/ab && mkdir -p $o /tmp/ab
trap 'tar czf "${OUT:?}/ab.tgz" -C /tmp about' EXIT
for b in base new; do xz -dc "$d/muser-$b.xz" >/tmp/ab/muser-$b && chmod +x /tmp/ab/muser-$b; done
T=$d/target.gguf
[ -f "$d/block.gguf.xz" ] && xz -dc "$d/block.gguf.xz" >/tmp/ab/block.gguf
cp "$d"/*.rev $o/ 2>/dev/null
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; grep -m1 'model name' /proc/cpuinfo; } >$o/env.txt
field() { grep -o "\"$1\":[0-9.e+-]*" "$2" | head -1 | cut -d: -f2; }
for ctx in ${CTXS:-2048 8192}; do
	for r in $(seq "${ROUNDS:-2}"); do
		order="base new"
		[ $((r % 2)) = 0 ] && order="new base"
		for b in $order; do
			f=$o/plain-$ctx-$r-$b.json
			/tmp/ab/muser-$b bench --device cuda --model "$T" --prompt-tokens $ctx --gen-tokens 256 --reps 3 --json >$f 2>>$o/err.txt
			echo "plain ctx=$ctx round=$r $b prefill $(field prefill_tok_s $f) decode $(field decode_tok_s $f)" | tee -a $o/summary.txt
			if [ -f /tmp/ab/block.gguf ] && [ -f "$d/text.txt" ]; then
				f=$o/block-$ctx-$r-$b.json
				/tmp/ab/muser-$b bench --device cuda --model "$T" --prompt-tokens $ctx --gen-tokens 384 --reps 3 \
					--temperature 0 --text "$d/text.txt" --draft-block /tmp/ab/block.gguf --json >$f 2>>$o/err.txt
				echo "block ctx=$ctx round=$r $b plain $(field plain_decode_tok_s $f) lane $(field draft_decode_tok_s $f) identical $(grep -o '"identical":[a-z]*' $f)" | tee -a $o/summary.txt
			fi
		done
	done
done
command -v ncu >/dev/null || { echo "no ncu: kernel times skipped" | tee -a $o/summary.txt; exit 0; }
for b in base new; do
	# 2,048 tokens of prefill, then 12 decode steps launched one by one
	# (no graphs); the first launches (the prefill's) are skipped.
	timeout 200 ncu --clock-control none -s "${NCU_SKIP:-2500}" -c "${NCU_COUNT:-400}" --metrics gpu__time_duration.sum --csv \
		/tmp/ab/muser-$b bench --device cuda --model "$T" --prompt-tokens 2048 --gen-tokens 12 --reps 1 --cuda-graphs=false \
		>$o/ncu-$b.csv 2>$o/ncu-$b.err
	echo "== kernels, $b (µs per launch)" | tee -a $o/summary.txt
	python3 - $o/ncu-$b.csv <<'PY' | tee -a $o/summary.txt
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no ncu rows")
h = rows[0]
k, v = h.index("Kernel Name"), h.index("Metric Value")
g = h.index("Grid Size") if "Grid Size" in h else None
t = collections.defaultdict(list)
for r in rows[1:]:
    try:
        t[(r[k], r[g] if g is not None else "")].append(float(r[v].replace(",", "")) / 1000)
    except ValueError:
        pass
for (name, grid), xs in sorted(t.items(), key=lambda x: -sum(x[1])):
    print(f"{name[:40]:40s} {grid:14s} n={len(xs):4d} mean={sum(xs)/len(xs):7.2f} total={sum(xs):8.1f}")
PY
done
