package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cukernels"
	"github.com/muserhq/muser/infer/kvcache"
)

// ErrNoDriver is returned by New when no usable CUDA driver library
// (libcuda.so.1) can be loaded; the error names every path tried.
var ErrNoDriver = cu.ErrNoDriver

// ErrNoDevice is returned by New when the driver loads but the device
// asked for does not exist.
var ErrNoDevice = cu.ErrNoDevice

// Options configures the CUDA device.
type Options struct {
	// Ordinal is the GPU to use, 0 for the first.
	Ordinal int
	// PTX loads the kernels' PTX (compiled by the driver) instead of the
	// sm_90 cubin; it is chosen anyway on a GPU other than sm_90.
	PTX bool
	// Profile times every kernel launch with device events (Profile
	// returns the totals); it slows the forward passes a little. It
	// launches every kernel from the host (no graphs).
	Profile bool
	// NoGraphs launches every kernel of every forward pass from the host,
	// one cuLaunchKernel each. By default a pass of at most GraphRows rows
	// runs as a CUDA graph (Device.Launches counts both); the kernels and
	// what they compute are the same either way.
	NoGraphs bool
	// NoEarlyLaunch builds graphs whose kernels each start only once
	// those they wait for have ended. By default a graph's kernels may
	// start early (programmatic dependent launch, where the driver has
	// it: cu.Driver.EarlyLaunch): every kernel of the module waits for
	// its predecessors' results before it reads or writes what they
	// touch, so what they compute is the same either way.
	NoEarlyLaunch bool
	// GraphLayers is how many layers of a graph pass go into one graph
	// launch (the first also holds the embedding, the last the output):
	// the GPU runs the first layers while the host records the next. 0
	// means DefaultGraphLayers; a value of at least the model's layers
	// makes a pass one graph.
	GraphLayers int
	// FusedAttention is the longest context, in positions, at which a
	// pass of runs (consecutive rows of a sequence at consecutive
	// positions, decode steps among them) rotates, stores and attends
	// in one launch a layer (cukernels.RoPEAttention: a thread block a
	// row and head); longer contexts launch RoPE and the cache store,
	// then the attention's kernels, which spread each head's positions
	// over many thread blocks. 0 means DefaultFusedAttention; a
	// negative value never fuses; the kernel's own bound
	// (cukernels.AttnFusedMax) caps it. The results are the same bits
	// either way.
	FusedAttention int
}

// DefaultGraphLayers is Options.GraphLayers's default: a 24-layer model's
// decode step is six graph launches of about 60 kernels (on an H100, 4
// layers a launch decoded 2% faster than 8 and 14% faster than one graph
// a step: docs/benchmarks.md).
const DefaultGraphLayers = 4

// DefaultFusedAttention is Options.FusedAttention's default, in
// positions. One thread block a row and head attends to every position
// itself, so the fused launch saves four launches a layer but reads a
// long context through few multiprocessors: on an H100, decoding the
// Qwen2.5-0.5B shape 64 tokens from a context of P, it was 1.12× the
// separate launches at P = 2, 1.04× at 128, 0.98× at 192 and 256, 0.92×
// at 512 (docs/benchmarks.md).
const DefaultFusedAttention = 192

// GraphRows is the most rows a forward pass may have to run as a CUDA
// graph: decode steps, small mixed batches and speculative verification.
const GraphRows = 64

// maxGraphs bounds the graphs a model keeps instantiated for each graph
// launch of a pass (Options.GraphLayers).
const maxGraphs = 8

// Launches counts how the kernels of the forward passes were launched
// (Device.Launches).
type Launches struct {
	Passes       int64 // forward passes
	Direct       int64 // kernels launched from the host, one call each
	GraphRuns    int64 // graph launches (one per graph pass)
	GraphKernels int64 // kernels run inside them
	GraphsBuilt  int64 // graphs instantiated
	NodesUpdated int64 // graph nodes whose parameters were set before a run
}

// Device is one NVIDIA GPU as an engine.Device: it binds models whose
// backends compute muser's exact numerics (engine.EngineName) there.
type Device struct {
	dev   *cu.Device
	info  cu.Info
	image string

	prof   *profiler // nil unless Options.Profile
	graphs bool      // run small passes as graphs (Options.NoGraphs, the driver)
	early  bool      // graphs' kernels launch early (Options.NoEarlyLaunch, the driver)
	glay   int       // layers per graph launch (Options.GraphLayers)
	fusedN int       // contexts of at most this many positions attend fused (Options.FusedAttention)

	raised map[string]uint32 // the dynamic shared memory each function was allowed (device thread only)

	mu       sync.Mutex
	fns      map[string]cu.Function
	launches Launches // guarded by mu
	closed   bool
}

// Launches returns the counts of kernel launches since New.
func (d *Device) Launches() Launches {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.launches
}

// count adds a forward pass's launches to the device's counts.
func (d *Device) count(direct int, before, after cu.GraphStats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := &d.launches
	l.Passes++
	l.Direct += int64(direct)
	l.GraphRuns += after.Runs - before.Runs
	l.GraphKernels += after.Kernels - before.Kernels
	l.GraphsBuilt += after.Built - before.Built
	l.NodesUpdated += after.Updated - before.Updated
}

// New loads the CUDA driver, opens GPU o.Ordinal and loads the kernels.
// Without a driver it fails with an error matching ErrNoDriver that names
// the library and every path tried.
func New(o Options) (*Device, error) {
	drv, err := cu.Open()
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	if o.Ordinal < 0 || o.Ordinal >= n {
		return nil, fmt.Errorf("--device cuda:%d: %w (the driver %s sees %d)", o.Ordinal, ErrNoDevice, drv, n)
	}
	dev, err := drv.OpenDevice(o.Ordinal)
	if err != nil {
		return nil, fmt.Errorf("--device cuda:%d: %w", o.Ordinal, err)
	}
	d := &Device{dev: dev, info: dev.Info(), fns: map[string]cu.Function{}, raised: map[string]uint32{}}
	if o.Profile {
		d.prof = &profiler{}
	}
	img := cukernels.Cubin()
	d.image = "cubin"
	if o.PTX || d.info.ComputeMajor != 9 || d.info.ComputeMinor != 0 {
		img, d.image = cukernels.PTX(), "ptx"
	}
	err = dev.Do(func(c *cu.Ctx) error {
		d.graphs = !o.NoGraphs && !o.Profile && c.Graphs()
		d.early = d.graphs && !o.NoEarlyLaunch && c.EarlyLaunch()
		d.glay = o.GraphLayers
		if d.glay <= 0 {
			d.glay = DefaultGraphLayers
		}
		d.fusedN = fusedPositions(o.FusedAttention)
		m, err := c.LoadModule(img)
		if err != nil {
			return fmt.Errorf("loading the kernels' %s: %w", d.image, err)
		}
		for _, k := range cukernels.KernelTable() {
			if k.SelfTest {
				continue
			}
			f, err := c.Function(m, k.Name)
			if err != nil {
				return err
			}
			d.fns[k.Name] = f
		}
		return nil
	})
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("--device cuda:%d: %w", o.Ordinal, err)
	}
	return d, nil
}

// fusedPositions resolves Options.FusedAttention: the longest context
// that attends in one launch, 0 for none.
func fusedPositions(o int) int {
	switch {
	case o < 0:
		return 0
	case o == 0:
		return DefaultFusedAttention
	}
	return min(o, cukernels.AttnFusedMax)
}

// graphLaunches returns the graph launches of a graph pass over a model
// of layers layers (Options.GraphLayers).
func (d *Device) graphLaunches(layers int) int { return max(1, (layers+d.glay-1)/d.glay) }

// Name returns "cuda:N NAME (sm_XY, cubin|ptx[, no graphs|, no early
// launch])".
func (d *Device) Name() string {
	g := ""
	switch {
	case !d.graphs:
		g = ", no graphs"
	case !d.early:
		g = ", no early launch"
	}
	return fmt.Sprintf("cuda:%d %s (sm_%d%d, %s%s)", d.info.Ordinal, d.info.Name, d.info.ComputeMajor, d.info.ComputeMinor, d.image, g)
}

// Close releases the GPU: every model bound on it must be closed first.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.dev.Close()
}

// HostWeights reports false: Bind copies the weights to the GPU once
// (engine.Open keeps the file mapped).
func (d *Device) HostWeights() bool { return false }

// Bind uploads w's weights to the GPU (each matrix in its GGUF bytes) and
// returns a backend of the exact numerics.
func (d *Device) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	c := &w.Config
	if c.HeadDim > cukernels.MaxAttnDim {
		return nil, &engine.HParamError{Key: c.Arch + ".attention.key_length", Err: engine.ErrUnsupported,
			Reason: fmt.Sprintf("is %d; the CUDA attention kernels take at most %d", c.HeadDim, cukernels.MaxAttnDim)}
	}
	for _, t := range w.Matrices() {
		if t == &w.TokEmbd && !w.Tied {
			continue // only looked up (Embed decodes every type)
		}
		if _, err := cukernels.ActOf(t.Type); err != nil {
			return nil, &engine.TensorError{Name: t.Name, Err: errors.Join(engine.ErrUnsupported, err),
				Reason: fmt.Sprintf("type %v has no CUDA kernel", t.Type)}
		}
	}
	b := &backend{d: d, w: w, cfg: c, kv: kv}
	if err := d.dev.Do(b.upload); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// function returns l's kernel, with its dynamic shared memory allowance
// raised to l.Shared for any launch that has some (on the device's
// thread): the default 48 KiB counts the kernel's static shared memory
// too, so a dynamic size under 48 KiB can still be over it (the tiled
// Q8_0 product's 47 KiB beside its 3 KiB of static tables).
func (d *Device) function(c *cu.Ctx, l cukernels.Launch) (cu.Function, error) {
	f, ok := d.fns[l.Kernel]
	if !ok {
		return f, fmt.Errorf("cuda: kernel %s is not loaded", l.Kernel)
	}
	if l.Shared > 0 && d.raised[l.Kernel] < l.Shared {
		if err := c.SetMaxDynamicShared(f, int(l.Shared)); err != nil {
			return f, err
		}
		d.raised[l.Kernel] = l.Shared
	}
	return f, nil
}

// launchNow launches f as l describes on the device's stream, between two
// events when profiling.
func (d *Device) launchNow(c *cu.Ctx, f cu.Function, l cukernels.Launch) error {
	if d.prof != nil {
		if err := d.prof.begin(c, l.Kernel); err != nil {
			return err
		}
	}
	if err := c.Launch(f, l.Grid, l.Block, l.Shared, c.Stream(), l.Args...); err != nil {
		return err
	}
	if d.prof != nil {
		return d.prof.end(c)
	}
	return nil
}
