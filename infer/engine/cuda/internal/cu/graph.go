package cu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"
)

// KernelLaunch is one kernel launch as Launch takes it, for RunGraph.
// After lists the launches, by index among those of the same RunGraph
// call and each before this one, that it waits for; nil means the one
// just before it (none for the first). Launches that wait for none of
// each other may run at the same time.
//
// Early marks a kernel that executes griddepcontrol.wait before it reads
// or writes anything the launches it waits for write or read (and reads
// before it only memory no launch of the graph writes): where the driver
// can (Driver.EarlyLaunch), its edges are programmatic, so that its CTAs
// may start once every CTA of those launches has passed its own wait
// (griddepcontrol.launch_dependents) or ended, and its launch overlaps
// their work. A kernel without that wait must not be marked: it could
// read their results before they are written.
type KernelLaunch struct {
	F           Function
	Grid, Block [3]uint32
	Shared      uint32
	Args        []any
	After       []int
	Early       bool
}

// The layout of CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h of CUDA 12 and 13) on
// a 64-bit host: CUfunction func; unsigned gridDimX, Y, Z, blockDimX, Y,
// Z, sharedMemBytes; (4 bytes of padding); void **kernelParams; void
// **extra; CUkernel kern; CUcontext ctx. CUDA_KERNEL_NODE_PARAMS_v1 is
// its first 56 bytes (up to and with extra).
const (
	knFunc   = 0
	knGrid   = 8
	knBlock  = 20
	knShared = 32
	knParams = 40
	knExtra  = 48
	knKern   = 56
	knCtx    = 64
	knSize   = 72
	knSizeV1 = 56
)

// A graph call's use of the arena: the launch's parameter block before
// depOff; from depOff the nodes a new node depends on (CUgraphNode[]),
// or for early-launch edges the three arrays cuGraphAddDependencies_v2
// takes (from nodes, to nodes, CUgraphEdgeData; 8 bytes an edge each);
// its CUDA_KERNEL_NODE_PARAMS at nodeParamsOff.
const (
	depOff        = 48 << 10
	nodeParamsOff = arenaSize - 256
	maxDeps       = (nodeParamsOff - depOff) / 24
)

// CUgraphEdgeData of an early-launch edge (cuda.h, CUDA 12.3): from_port
// CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC (the upstream kernel's CTAs have
// all triggered, griddepcontrol.launch_dependents, or ended), to_port 0,
// type CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC, five reserved zero bytes.
const (
	edgePortProgrammatic = 1
	edgeTypeProgrammatic = 1
)

// putKernelNodeParams writes a CUDA_KERNEL_NODE_PARAMS_v2 into b (knSize
// bytes): function f, the dimensions, shared bytes of dynamic shared
// memory, the parameter block at address params (0: none), no extra, and
// kern and ctx zero (the function given is the one launched, in the
// current context).
func putKernelNodeParams(b []byte, f uintptr, grid, block [3]uint32, shared uint32, params uintptr) {
	b = b[:knSize]
	clear(b)
	ne := binary.NativeEndian
	ne.PutUint64(b[knFunc:], uint64(f))
	for i := range 3 {
		ne.PutUint32(b[knGrid+4*i:], grid[i])
		ne.PutUint32(b[knBlock+4*i:], block[i])
	}
	ne.PutUint32(b[knShared:], shared)
	ne.PutUint64(b[knParams:], uint64(params))
}

// node is one recorded launch: the function, the dimensions, in its
// chain's vals[lo:hi] its argument values laid out as in the parameter
// block after the pointer array (padding zero), and in deps[dlo:dhi] the
// launches it waits for.
type node struct {
	fn          uintptr
	grid, block [3]uint32
	shared      uint32
	lo, hi      int
	dlo, dhi    int
	early       bool
}

// chain is a recorded sequence of launches and what each waits for.
type chain struct {
	nodes []node
	vals  []byte
	deps  []int32
}

// record lays ls out into ch, reusing its memory (and slots'), and
// checks each launch's arguments as Launch does.
func (ch *chain) record(ls []KernelLaunch, slots []slot) ([]slot, error) {
	ch.nodes, ch.vals, ch.deps = ch.nodes[:0], ch.vals[:0], ch.deps[:0]
	for i, l := range ls {
		dlo := len(ch.deps)
		switch {
		case l.After == nil && i > 0:
			ch.deps = append(ch.deps, int32(i-1))
		case len(l.After) > maxDeps:
			return slots, fmt.Errorf("%w: launch %d (%s) waits for %d launches, at most %d", ErrGraph, i, l.F.name, len(l.After), maxDeps)
		}
		for _, d := range l.After {
			if d < 0 || d >= i {
				return slots, fmt.Errorf("%w: launch %d (%s) waits for launch %d", ErrGraph, i, l.F.name, d)
			}
			ch.deps = append(ch.deps, int32(d))
		}
		var size int
		var err error
		slots, size, err = layoutArgs(l.Args, slots)
		if err == nil {
			err = checkParams(l.F, l.Args, slots)
		}
		if err != nil {
			return slots, fmt.Errorf("launch %d of the graph (%s): %w", i, l.F.name, err)
		}
		base := len(l.Args) * ptrSize
		lo := len(ch.vals)
		n := max(size-base, 0)
		ch.vals = slices.Grow(ch.vals, n)[:lo+n]
		clear(ch.vals[lo:])
		for j, a := range l.Args {
			s := slots[j]
			putArg(ch.vals[lo+s.Off-base:lo+s.Off-base+s.Size], a)
		}
		ch.nodes = append(ch.nodes, node{fn: l.F.h, grid: l.Grid, block: l.Block, shared: l.Shared, lo: lo, hi: lo + n,
			dlo: dlo, dhi: len(ch.deps), early: l.Early})
	}
	return slots, nil
}

// sameKernels reports whether a and b launch the same functions in the
// same order, with argument blocks of the same sizes, each waiting for
// the same launches: a graph of one can run the other by setting the
// parameters of the nodes that differ.
func sameKernels(a, b *chain) bool {
	if len(a.nodes) != len(b.nodes) || !slices.Equal(a.deps, b.deps) {
		return false
	}
	for i := range a.nodes {
		x, y := &a.nodes[i], &b.nodes[i]
		if x.fn != y.fn || x.hi-x.lo != y.hi-y.lo || x.dhi-x.dlo != y.dhi-y.dlo || x.early != y.early {
			return false
		}
	}
	return true
}

// changed appends to dst the indices of the nodes of b whose dimensions,
// shared memory or argument values differ from a's (a and b of the same
// kernels).
func changed(a, b *chain, dst []int) []int {
	dst = dst[:0]
	for i := range b.nodes {
		x, y := &a.nodes[i], &b.nodes[i]
		if x.grid != y.grid || x.block != y.block || x.shared != y.shared || !bytes.Equal(a.vals[x.lo:x.hi], b.vals[y.lo:y.hi]) {
			dst = append(dst, i)
		}
	}
	return dst
}

// Graph is an instantiated CUDA graph: a chain of kernel nodes, each
// after the one before, and the parameters each node has now.
type Graph struct {
	g, exec uintptr
	nodes   []uintptr
	rec     chain
}

// GraphStats counts what RunGraph did with a Graphs.
type GraphStats struct {
	Runs    int64 // graph launches
	Kernels int64 // kernel launches run inside them
	Built   int64 // graphs instantiated
	Evicted int64 // graphs destroyed to make room for another
	Updated int64 // nodes whose parameters were set before a run
}

// Graphs keeps up to a bound of instantiated graphs, most recently used
// first, and runs chains of launches with them (Ctx.RunGraph). Several
// may launch the same kernels (batches of different shapes); a run takes
// the one whose parameters differ least. A Graphs belongs to one device;
// Ctx.DestroyGraphs frees it.
type Graphs struct {
	max   int
	list  []*Graph
	cur   chain
	diff  []int
	stats GraphStats
}

// NewGraphs returns an empty Graphs that keeps at most max graphs (at
// least 1).
func NewGraphs(n int) *Graphs { return &Graphs{max: max(n, 1)} }

// Stats returns the counts so far.
func (gs *Graphs) Stats() GraphStats { return gs.stats }

// Len returns the number of graphs held.
func (gs *Graphs) Len() int { return len(gs.list) }

// pick chooses the graph to run cur with: the index of a held graph of
// the same kernels whose parameters differ least, with the nodes to set
// in gs.diff, or -1 when a new graph should be built: none launches these
// kernels, or the best differs in more than a quarter of its nodes and
// there is room for another.
func (gs *Graphs) pick(cur *chain) int {
	best := -1
	var diff []int
	for i, g := range gs.list {
		if !sameKernels(&g.rec, cur) {
			continue
		}
		d := changed(&g.rec, cur, gs.diff[:0])
		if best < 0 || len(d) < len(diff) {
			best, diff = i, slices.Clone(d)
		}
	}
	if best >= 0 && 4*len(diff) > len(cur.nodes) && len(gs.list) < gs.max {
		best = -1
	}
	gs.diff = append(gs.diff[:0], diff...)
	return best
}

// Graphs reports whether the driver can run graphs (Driver.Graphs).
func (c *Ctx) Graphs() bool { return c.drv.Graphs() }

// EarlyLaunch reports whether graphs can hold early-launch edges
// (Driver.EarlyLaunch).
func (c *Ctx) EarlyLaunch() bool { return c.drv.EarlyLaunch() }

// RunGraph queues ls on stream s as one graph launch: each kernel runs
// after the launches it waits for (KernelLaunch.After; by default the one
// before it, so that a list without After runs as if launched one by
// one). A held
// graph of the same kernels is reused, with the parameters of the nodes
// that differ set first; otherwise a new one is built (and the least
// recently used dropped when gs is full). Without the driver's graph
// functions it returns ErrNoGraphs; arguments are checked as Launch
// checks them, and nothing is queued when they are wrong.
func (c *Ctx) RunGraph(gs *Graphs, ls []KernelLaunch, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	if !c.drv.Graphs() {
		return ErrNoGraphs
	}
	if len(ls) == 0 {
		return nil
	}
	var err error
	if c.slots, err = gs.cur.record(ls, c.slots); err != nil {
		return err
	}
	var g *Graph
	if i := gs.pick(&gs.cur); i >= 0 {
		g = gs.list[i]
		copy(gs.list[1:i+1], gs.list[:i])
		gs.list[0] = g
		for _, j := range gs.diff {
			if err := c.setNode(g, j, ls[j]); err != nil {
				gs.list = gs.list[1:]
				return joinErr(err, c.destroyGraph(g))
			}
		}
		gs.stats.Updated += int64(len(gs.diff))
	} else {
		if len(gs.list) >= gs.max {
			last := gs.list[len(gs.list)-1]
			gs.list = gs.list[:len(gs.list)-1]
			gs.stats.Evicted++
			if err := c.destroyGraph(last); err != nil {
				return err
			}
		}
		if g, err = c.buildGraph(ls, &gs.cur); err != nil {
			return err
		}
		gs.list = slices.Insert(gs.list, 0, g)
		gs.stats.Built++
	}
	g.rec, gs.cur = gs.cur, g.rec
	if r := call(c.drv.fn.graphLaunch, g.exec, s.h); r != 0 {
		return c.drv.newError("cuGraphLaunch", r)
	}
	gs.stats.Runs++
	gs.stats.Kernels += int64(len(ls))
	return nil
}

func joinErr(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w (and freeing the graph: %v)", a, b)
}

// nodeParams packs l's arguments and its CUDA_KERNEL_NODE_PARAMS into the
// arena and returns the struct's address.
func (c *Ctx) nodeParams(l KernelLaunch) (uintptr, error) {
	kp, err := c.pack(l.F, l.Args, c.arena[:depOff])
	if err != nil {
		return 0, err
	}
	putKernelNodeParams(c.arena[nodeParamsOff:], l.F.h, l.Grid, l.Block, l.Shared, kp)
	return c.arenaAddr + nodeParamsOff, nil
}

// buildGraph creates and instantiates the graph of ls's kernel nodes,
// each depending on the nodes its launch waits for (rec, ls recorded).
func (c *Ctx) buildGraph(ls []KernelLaunch, rec *chain) (*Graph, error) {
	g := &Graph{nodes: make([]uintptr, len(ls))}
	if err := c.drv.check("cuGraphCreate", call(c.drv.fn.graphCreate, uintptr(unsafe.Pointer(&g.g)), 0)); err != nil {
		return nil, err
	}
	fail := func(err error) (*Graph, error) { return nil, joinErr(err, c.destroyGraph(g)) }
	for i, l := range ls {
		p, err := c.nodeParams(l)
		if err != nil {
			return fail(err)
		}
		nd := &rec.nodes[i]
		deps := rec.deps[nd.dlo:nd.dhi]
		early := nd.early && len(deps) > 0 && c.drv.EarlyLaunch()
		var dp, nd0 uintptr
		if !early && len(deps) > 0 {
			for j, d := range deps {
				binary.NativeEndian.PutUint64(c.arena[depOff+8*j:], uint64(g.nodes[d]))
			}
			dp, nd0 = c.arenaAddr+depOff, uintptr(len(deps))
		}
		if r := call(c.drv.fn.graphAddKernelNode, uintptr(unsafe.Pointer(&g.nodes[i])), g.g, dp, nd0, p); r != 0 {
			return fail(c.drv.newError("cuGraphAddKernelNode "+l.F.name, r))
		}
		if early {
			if err := c.addEarlyEdges(g, deps, i); err != nil {
				return fail(fmt.Errorf("%w (launch %d, %s)", err, i, l.F.name))
			}
		}
	}
	if r := call(c.drv.fn.graphInstantiate, uintptr(unsafe.Pointer(&g.exec)), g.g, 0); r != 0 {
		return fail(c.drv.newError("cuGraphInstantiateWithFlags", r))
	}
	return g, nil
}

// addEarlyEdges adds to g an early-launch (programmatic) edge from each
// node of deps to node i.
func (c *Ctx) addEarlyEdges(g *Graph, deps []int32, i int) error {
	n := len(deps)
	from, to, ed := depOff, depOff+8*n, depOff+16*n
	ne := binary.NativeEndian
	for j, d := range deps {
		ne.PutUint64(c.arena[from+8*j:], uint64(g.nodes[d]))
		ne.PutUint64(c.arena[to+8*j:], uint64(g.nodes[i]))
		e := c.arena[ed+8*j : ed+8*j+8]
		clear(e)
		e[0], e[2] = edgePortProgrammatic, edgeTypeProgrammatic
	}
	a := c.arenaAddr
	return c.drv.check("cuGraphAddDependencies", call(c.drv.fn.graphAddDependencies, g.g,
		a+uintptr(from), a+uintptr(to), a+uintptr(ed), uintptr(n)))
}

// setNode sets node i of g's executable graph to launch l.
func (c *Ctx) setNode(g *Graph, i int, l KernelLaunch) error {
	p, err := c.nodeParams(l)
	if err != nil {
		return err
	}
	if r := call(c.drv.fn.graphExecKernelNodeSetParams, g.exec, g.nodes[i], p); r != 0 {
		return c.drv.newError("cuGraphExecKernelNodeSetParams "+l.F.name, r)
	}
	return nil
}

// destroyGraph frees g's executable graph and graph.
func (c *Ctx) destroyGraph(g *Graph) error {
	var err error
	if g.exec != 0 {
		err = c.drv.check("cuGraphExecDestroy", call(c.drv.fn.graphExecDestroy, g.exec))
		g.exec = 0
	}
	if g.g != 0 {
		if e := c.drv.check("cuGraphDestroy", call(c.drv.fn.graphDestroy, g.g)); err == nil {
			err = e
		}
		g.g = 0
	}
	return err
}

// DestroyGraphs frees every graph gs holds; gs may be used again after.
// Work already queued from them still completes.
func (c *Ctx) DestroyGraphs(gs *Graphs) error {
	if err := c.enter(); err != nil {
		return err
	}
	var first error
	for _, g := range gs.list {
		if err := c.destroyGraph(g); err != nil && first == nil {
			first = err
		}
	}
	gs.list = nil
	return first
}
