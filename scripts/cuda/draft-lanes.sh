# draft_lane_args LANE DRAFT BLOCK prints the `muser bench` arguments of a
# draft lane by its name in the benchmark scripts' LANES: lookup, model
# (DRAFT, a draft model), both (lookup, then the draft model), block
# (BLOCK, a block drafter) and lookup+block. It fails naming the lane for
# any other name, and for a block lane without BLOCK. Sourced by
# scripts/bench-draft.sh and scripts/cuda/gpu-spec.sh.
draft_lane_args() {
	case $1 in
	lookup) echo --draft-lookup ;;
	model) echo "--draft-model $2" ;;
	both) echo "--draft-lookup --draft-model $2" ;;
	block | lookup+block)
		[ -n "$3" ] || { echo "lane $1 needs the block drafter (BLOCK)" >&2; return 2; }
		[ "$1" = block ] && echo "--draft-block $3" || echo "--draft-lookup --draft-block $3" ;;
	*) echo "unknown lane $1 (lookup, model, both, block, lookup+block)" >&2; return 2 ;;
	esac
}
