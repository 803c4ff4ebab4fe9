package cu

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"unsafe"
)

// kernelNodeParamsV2 mirrors cuda.h's CUDA_KERNEL_NODE_PARAMS_v2 (CUDA 12
// and 13) field for field; Go lays these types out as C does on the
// 64-bit hosts muser builds for.
type kernelNodeParamsV2 struct {
	fn                     uintptr // CUfunction func
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	shared                 uint32
	params, extra          uintptr // void **kernelParams, **extra
	kern, ctx              uintptr // CUkernel kern, CUcontext ctx
}

// TestKernelNodeParamsLayout checks the offsets putKernelNodeParams
// writes at against the C struct's natural layout, the _v1 struct as its
// prefix, and that the bytes read back through the struct are the fields
// given.
func TestKernelNodeParamsLayout(t *testing.T) {
	var k kernelNodeParamsV2
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"func", unsafe.Offsetof(k.fn), knFunc},
		{"gridDimX", unsafe.Offsetof(k.gridX), knGrid},
		{"gridDimZ", unsafe.Offsetof(k.gridZ), knGrid + 8},
		{"blockDimX", unsafe.Offsetof(k.blockX), knBlock},
		{"blockDimZ", unsafe.Offsetof(k.blockZ), knBlock + 8},
		{"sharedMemBytes", unsafe.Offsetof(k.shared), knShared},
		{"kernelParams", unsafe.Offsetof(k.params), knParams},
		{"extra", unsafe.Offsetof(k.extra), knExtra},
		{"kern", unsafe.Offsetof(k.kern), knKern},
		{"ctx", unsafe.Offsetof(k.ctx), knCtx},
		{"sizeof", unsafe.Sizeof(k), knSize},
		{"sizeof _v1 (up to extra)", unsafe.Offsetof(k.extra) + 8, knSizeV1},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.want)
		}
	}
	b := make([]byte, knSize)
	for i := range b {
		b[i] = 0xee // putKernelNodeParams must clear extra, kern, ctx and the padding
	}
	putKernelNodeParams(b, 0x1122334455667788, [3]uint32{7, 8, 9}, [3]uint32{256, 2, 1}, 4096, 0xabcdef00)
	got := *(*kernelNodeParamsV2)(unsafe.Pointer(&b[0]))
	want := kernelNodeParamsV2{fn: 0x1122334455667788, gridX: 7, gridY: 8, gridZ: 9, blockX: 256, blockY: 2, blockZ: 1,
		shared: 4096, params: 0xabcdef00}
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if pad := binary.NativeEndian.Uint32(b[knShared+4:]); pad != 0 {
		t.Errorf("padding after sharedMemBytes = %#x, want 0", pad)
	}
}

// fakeFn is a Function with a made-up handle and, when params is not
// nil, known parameters.
func fakeFn(h uintptr, params ...Param) Function {
	return Function{h: h, name: "k" + string(rune('0'+h)), params: params, known: params != nil}
}

func TestChainRecordAndChanged(t *testing.T) {
	a, b := fakeFn(1), fakeFn(2)
	base := []KernelLaunch{
		{F: a, Grid: [3]uint32{4, 1, 1}, Block: [3]uint32{256, 1, 1}, Args: []any{DevicePtr(0x1000), int32(5)}},
		{F: b, Grid: [3]uint32{1, 2, 3}, Block: [3]uint32{128, 1, 1}, Shared: 64, Args: []any{float32(1.5), DevicePtr(0x2000), uint32(7)}},
		{F: a, Grid: [3]uint32{4, 1, 1}, Block: [3]uint32{256, 1, 1}, Args: []any{DevicePtr(0x3000), int32(5)}},
		{F: b, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}},
	}
	edit := func(f func(ls []KernelLaunch)) []KernelLaunch {
		ls := slices.Clone(base)
		for i := range ls {
			ls[i].Args = slices.Clone(ls[i].Args)
		}
		f(ls)
		return ls
	}
	tests := []struct {
		name    string
		ls      []KernelLaunch
		same    bool
		changed []int
	}{
		{"identical", edit(func([]KernelLaunch) {}), true, []int{}},
		{"a pointer moved (buffers regrown)", edit(func(ls []KernelLaunch) { ls[2].Args[0] = DevicePtr(0x3100) }), true, []int{2}},
		{"an int argument", edit(func(ls []KernelLaunch) { ls[0].Args[1] = int32(6) }), true, []int{0}},
		{"a float argument's bits", edit(func(ls []KernelLaunch) { ls[1].Args[0] = float32(-1.5) }), true, []int{1}},
		{"grid (a position further)", edit(func(ls []KernelLaunch) { ls[1].Grid[2] = 4 }), true, []int{1}},
		{"block", edit(func(ls []KernelLaunch) { ls[3].Block[0] = 64 }), true, []int{3}},
		{"shared memory", edit(func(ls []KernelLaunch) { ls[1].Shared = 128 }), true, []int{1}},
		{"several", edit(func(ls []KernelLaunch) { ls[0].Grid[0] = 5; ls[2].Args[1] = int32(0) }), true, []int{0, 2}},
		{"another kernel", edit(func(ls []KernelLaunch) { ls[3].F = a }), false, nil},
		{"a launch fewer", base[:3], false, nil},
		{"an argument's width", edit(func(ls []KernelLaunch) { ls[0].Args[1] = int64(5) }), false, nil},
		{"the default dependency written out", edit(func(ls []KernelLaunch) { ls[3].After = []int{2} }), true, []int{}},
		{"another dependency", edit(func(ls []KernelLaunch) { ls[3].After = []int{1} }), false, nil},
		{"a second dependency", edit(func(ls []KernelLaunch) { ls[3].After = []int{1, 2} }), false, nil},
		{"no dependency", edit(func(ls []KernelLaunch) { ls[2].After = []int{} }), false, nil},
		{"an early launch", edit(func(ls []KernelLaunch) { ls[1].Early = true }), false, nil},
	}
	var ref chain
	if _, err := ref.record(base, nil); err != nil {
		t.Fatal(err)
	}
	if len(ref.nodes) != len(base) {
		t.Fatalf("recorded %d nodes, want %d", len(ref.nodes), len(base))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c chain
			if _, err := c.record(tt.ls, nil); err != nil {
				t.Fatal(err)
			}
			if got := sameKernels(&ref, &c); got != tt.same {
				t.Fatalf("sameKernels = %v, want %v", got, tt.same)
			}
			if !tt.same {
				return
			}
			if got := changed(&ref, &c, nil); !slices.Equal(got, tt.changed) && len(got)+len(tt.changed) > 0 {
				t.Errorf("changed = %v, want %v", got, tt.changed)
			}
		})
	}
}

// TestChainRecordValues: a node's values are laid out as in the
// parameter block after the pointer array, padding zero.
func TestChainRecordValues(t *testing.T) {
	var c chain
	ls := []KernelLaunch{{F: fakeFn(1), Args: []any{uint32(0x01020304), DevicePtr(0x1122334455667788), uint8(9)}}}
	if _, err := c.record(ls, nil); err != nil {
		t.Fatal(err)
	}
	want := []byte{4, 3, 2, 1, 0, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 9}
	if got := c.vals[c.nodes[0].lo:c.nodes[0].hi]; !slices.Equal(got, want) {
		t.Errorf("values % x, want % x", got, want)
	}
	// Recording again into the same chain reuses it and clears the padding.
	ls[0].Args[0] = uint32(0xffffffff)
	if _, err := c.record(ls, nil); err != nil {
		t.Fatal(err)
	}
	want[0], want[1], want[2], want[3] = 0xff, 0xff, 0xff, 0xff
	if got := c.vals[c.nodes[0].lo:c.nodes[0].hi]; !slices.Equal(got, want) {
		t.Errorf("values after a second record % x, want % x", got, want)
	}
}

// TestChainRecordChecks: record refuses what Launch refuses.
func TestChainRecordChecks(t *testing.T) {
	k := fakeFn(3, Param{0, 8}, Param{8, 4})
	for _, tt := range []struct {
		name string
		args []any
	}{
		{"a Go int", []any{DevicePtr(1), 5}},
		{"too few", []any{DevicePtr(1)}},
		{"a wider value", []any{DevicePtr(1), uint64(2)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c chain
			_, err := c.record([]KernelLaunch{{F: fakeFn(1), Args: []any{int32(1)}}, {F: k, Args: tt.args}}, nil)
			if !errors.Is(err, ErrArg) {
				t.Errorf("record: %v, want ErrArg", err)
			}
		})
	}
	var c chain
	if _, err := c.record([]KernelLaunch{{F: k, Args: []any{DevicePtr(1), int32(2)}}}, nil); err != nil {
		t.Errorf("record of matching arguments: %v", err)
	}
}

// TestChainRecordDeps: a launch waits for the one before it unless After
// says otherwise, and After may name only earlier launches.
func TestChainRecordDeps(t *testing.T) {
	k := fakeFn(1)
	var c chain
	ls := []KernelLaunch{{F: k}, {F: k}, {F: k, After: []int{}}, {F: k, After: []int{0, 2}}, {F: k}}
	if _, err := c.record(ls, nil); err != nil {
		t.Fatal(err)
	}
	want := [][]int32{{}, {0}, {}, {0, 2}, {3}}
	for i, nd := range c.nodes {
		if got := c.deps[nd.dlo:nd.dhi]; !slices.Equal(got, want[i]) {
			t.Errorf("launch %d waits for %v, want %v", i, got, want[i])
		}
	}
	for _, after := range [][]int{{1}, {-1}, {0, 5}, make([]int, maxDeps+1)} {
		bad := []KernelLaunch{{F: k}, {F: k, After: after}}
		if _, err := c.record(bad, nil); !errors.Is(err, ErrGraph) {
			t.Errorf("launch 1 waiting for %d launches from %v: %v, want ErrGraph", len(after), after[:min(len(after), 2)], err)
		}
	}
}

// TestGraphsPick checks the choice between reusing a held graph and
// building another.
func TestGraphsPick(t *testing.T) {
	a, b := fakeFn(1), fakeFn(2)
	launches := func(grid uint32, p DevicePtr) []KernelLaunch {
		var ls []KernelLaunch
		for i := range 8 {
			ls = append(ls, KernelLaunch{F: a, Grid: [3]uint32{grid, 1, 1}, Args: []any{p + DevicePtr(i)}})
		}
		return append(ls, KernelLaunch{F: b, Args: []any{p}})
	}
	held := func(ls []KernelLaunch) *Graph {
		g := &Graph{}
		if _, err := g.rec.record(ls, nil); err != nil {
			t.Fatal(err)
		}
		return g
	}
	rec := func(ls []KernelLaunch) *chain {
		var c chain
		if _, err := c.record(ls, nil); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	other := []KernelLaunch{{F: b}}
	tests := []struct {
		name string
		max  int
		list [][]KernelLaunch
		cur  []KernelLaunch
		want int
		diff []int
	}{
		{"empty", 4, nil, launches(1, 0x100), -1, nil},
		{"only other kernels", 4, [][]KernelLaunch{other}, launches(1, 0x100), -1, nil},
		{"same parameters", 4, [][]KernelLaunch{other, launches(1, 0x100)}, launches(1, 0x100), 1, []int{}},
		{"one node differs", 4, [][]KernelLaunch{launches(1, 0x100)}, append(launches(1, 0x100)[:8], KernelLaunch{F: b, Args: []any{DevicePtr(7)}}), 0, []int{8}},
		{"the nearest of two", 4, [][]KernelLaunch{launches(2, 0x100), launches(1, 0x200), launches(1, 0x100)}, launches(1, 0x100), 2, []int{}},
		{"all differ, room left: build", 4, [][]KernelLaunch{launches(2, 0x100)}, launches(1, 0x100), -1, nil},
		{"all differ, full: update", 1, [][]KernelLaunch{launches(2, 0x100)}, launches(1, 0x100), 0, []int{0, 1, 2, 3, 4, 5, 6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs := NewGraphs(tt.max)
			for _, ls := range tt.list {
				gs.list = append(gs.list, held(ls))
			}
			got := gs.pick(rec(tt.cur))
			if got != tt.want {
				t.Fatalf("pick = %d, want %d", got, tt.want)
			}
			if got >= 0 && !slices.Equal(gs.diff, tt.diff) && len(gs.diff)+len(tt.diff) > 0 {
				t.Errorf("nodes to set %v, want %v", gs.diff, tt.diff)
			}
		})
	}
}

// TestRunGraphOutsideDo: RunGraph and DestroyGraphs refuse a Ctx whose Do
// has returned, like every Ctx method.
func TestRunGraphOutsideDo(t *testing.T) {
	c := &Ctx{}
	if err := c.RunGraph(NewGraphs(1), nil, Stream{}); !errors.Is(err, ErrOutsideDo) {
		t.Errorf("RunGraph: %v, want ErrOutsideDo", err)
	}
	if err := c.DestroyGraphs(NewGraphs(1)); !errors.Is(err, ErrOutsideDo) {
		t.Errorf("DestroyGraphs: %v, want ErrOutsideDo", err)
	}
}

// BenchmarkChainRecord measures the host cost of recording a decode
// step's worth of launches (530, 7 arguments each) and diffing it.
func BenchmarkChainRecord(b *testing.B) {
	ls := make([]KernelLaunch, 530)
	for i := range ls {
		ls[i] = KernelLaunch{F: fakeFn(uintptr(i%20 + 1)), Grid: [3]uint32{uint32(i), 1, 1}, Block: [3]uint32{256, 1, 1},
			Args: []any{DevicePtr(0x1000 + i), int32(896), int32(1), DevicePtr(0x2000), DevicePtr(0x3000), DevicePtr(0x4000), int32(i)}}
	}
	var ref, cur chain
	slots, _ := ref.record(ls, nil)
	var diff []int
	b.ResetTimer()
	for range b.N {
		slots, _ = cur.record(ls, slots)
		if !sameKernels(&ref, &cur) {
			b.Fatal("not the same kernels")
		}
		diff = changed(&ref, &cur, diff)
	}
	if len(diff) != 0 {
		b.Fatalf("%d nodes differ", len(diff))
	}
}
