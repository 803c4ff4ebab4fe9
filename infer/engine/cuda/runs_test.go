package cuda

import (
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cukernels"
)

func TestRunFirsts(t *testing.T) {
	a, b, c := &kv{}, &kv{}, &kv{}
	row := func(x *kv, pos int) engine.Row { return engine.Row{KV: x, Pos: pos} }
	run := func(x *kv, pos, n int) []engine.Row {
		var rs []engine.Row
		for i := range n {
			rs = append(rs, row(x, pos+i))
		}
		return rs
	}
	many, ids := make([]engine.Row, GraphRows+1), make([]int32, GraphRows) // distinct sequences
	for i := range many {
		many[i] = row(&kv{}, i)
	}
	for i := range ids {
		ids[i] = int32(i)
	}
	tests := []struct {
		name  string
		rows  []engine.Row
		first []int32 // nil: the pass does not attend with RoPEAttention
	}{
		{"one row", []engine.Row{row(a, 7)}, []int32{0}},
		{"distinct sequences", []engine.Row{row(a, 7), row(b, 0), row(c, 300)}, []int32{0, 1, 2}},
		{"a verification step beside a decode row", append(run(a, 40, 5), row(b, 9)), []int32{0, 0, 0, 0, 0, 5}},
		{"two runs", append(run(a, 0, 3), run(b, 100, 2)...), []int32{0, 0, 0, 3, 3}},
		{"the longest run", run(a, 10, cukernels.AttnFusedRun), make([]int32, cukernels.AttnFusedRun)},
		{"a run too long", run(a, 10, cukernels.AttnFusedRun+1), nil},
		{"a gap in positions", []engine.Row{row(a, 3), row(a, 5)}, nil},
		{"positions out of order", []engine.Row{row(a, 4), row(a, 3)}, nil},
		{"a sequence's rows apart", []engine.Row{row(a, 3), row(b, 0), row(a, 4)}, nil},
		{"more rows than a graph pass", many, nil},
		{"as many as a graph pass", many[:GraphRows], ids},
	}
	for _, tc := range tests {
		first, ok := runFirsts(tc.rows)
		if ok != (tc.first != nil) || !slices.Equal(first, tc.first) {
			t.Errorf("%s: runFirsts = %v, %v; want %v, %v", tc.name, first, ok, tc.first, tc.first != nil)
		}
	}
}

func TestFusedPositions(t *testing.T) {
	for _, c := range []struct{ opt, want int }{
		{0, DefaultFusedAttention},
		{-1, 0},
		{-4096, 0},
		{1, 1},
		{600, 600},
		{cukernels.AttnFusedMax, cukernels.AttnFusedMax},
		{cukernels.AttnFusedMax + 1, cukernels.AttnFusedMax},
	} {
		if got := fusedPositions(c.opt); got != c.want {
			t.Errorf("Options.FusedAttention %d: fused up to %d positions, want %d", c.opt, got, c.want)
		}
	}
}
