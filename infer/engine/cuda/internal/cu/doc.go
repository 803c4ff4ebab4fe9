// Package cu binds the CUDA driver API (libcuda.so.1) for the CUDA
// backend, without cgo: the library is loaded at run time with purego, so
// the binary builds and its tests run on machines with no GPU, no CUDA
// and no C compiler (CGO_ENABLED=0 as well as 1).
//
// # Loading
//
// Open loads the library and resolves every function the package calls,
// trying in order: the path in MUSER_LIBCUDA when it is set (and then
// nothing else); /usr/local/nvidia/lib64/libcuda.so.1;
// /usr/lib/<multiarch triplet>/libcuda.so.1; /usr/lib64/libcuda.so.1;
// /usr/lib/libcuda.so.1; and libcuda.so.1 through the dynamic loader's
// search. A library in a CUDA toolkit's compat/ directory is refused
// unless MUSER_LIBCUDA names it: an absolute path is resolved through its
// symbolic links before it is opened; for the loader's search, the file
// opened is read back with dlinfo and the library closed again if it lies
// there. Stub libraries (which answer CUDA_ERROR_STUB_LIBRARY) and
// libraries lacking a function are refused too. When nothing loads, Open
// returns a *LoadError that names every path tried and matches
// ErrNoDriver. Where a function has several exported versions, Open
// picks the one whose signature it calls (see funcs.symbols in driver.go
// for the CUDA 12 and 13 differences: cuCtxCreate_v2 or _v4,
// cuEventElapsedTime_v2 or the plain name); Driver.String names the
// choices.
//
// # Threading
//
// A CUDA context is current on one OS thread. Driver.OpenDevice starts a
// goroutine, locks it to its thread (runtime.LockOSThread), and creates
// the context and a stream there; every call that needs the context is
// made by that goroutine. Device.Do hands it a function and waits:
//
//	err := dev.Do(func(c *cu.Ctx) error {
//		if err := c.CopyHtoD(x, input); err != nil {
//			return err
//		}
//		for _, k := range plan { // hundreds of launches, one hand-over
//			if err := c.Launch(k.fn, k.grid, k.block, k.shared, c.Stream(), k.args...); err != nil {
//				return err
//			}
//		}
//		return c.CopyDtoH(output, y)
//	})
//
// Do calls from many goroutines run one at a time. The Ctx is valid only
// inside the function (afterwards its methods return ErrOutsideDo); the
// function must not call Do or Close (ErrNested). A panic inside is raised
// again in Do's caller as a *PanicError; a runtime.Goexit inside (t.Fatal)
// ends the device as Close does. Close destroys the context, which frees
// everything made through it, and ends the thread. Driver methods
// (Version, DeviceCount) need no context and run on any goroutine.
//
// A hand-over wakes the device's thread and then the caller's: about 34 µs
// a Do on a 2-core VM (BenchmarkOwnerDo), paid once per Do however many
// calls it makes.
//
// The device's stream synchronises with the legacy default stream, which
// the synchronous copies use: CopyDtoH after a Launch waits for it.
//
// # Kernel arguments
//
// cuLaunchKernel takes kernelParams, an array of pointers, one per
// parameter, each to the parameter's value. Launch lays the block out
// with layoutArgs: the pointer array first (8 bytes an entry), then the
// values in argument order, each aligned to its size (a Struct to its
// Align), from a 16-aligned base. The types passed are uint8, int8,
// uint16, int16, uint32, int32, float32, uint64, int64, float64,
// DevicePtr and Struct (raw bytes with an alignment); int, uint, uintptr,
// pointers, slices and strings are refused with an *ArgError naming the
// argument's index.
//
// The block is written into the Ctx's arena: memory mapped outside the Go
// heap (mmap), so the pointers the driver follows never point into Go
// memory that the garbage collector could free or move, the array the
// driver receives holds no Go pointers (cgo's rule for memory passed to
// C), and nothing is allocated per launch beyond the boxing of the
// arguments. The driver copies the values before cuLaunchKernel returns,
// so the next launch reuses the arena. Where the driver reports a
// kernel's parameters (cuFuncGetParamInfo, CUDA 12.4), Launch checks the
// argument count and each size against them before launching.
//
// Other pointers passed to the driver point at Go variables written in
// the call expression (uintptr(unsafe.Pointer(&x))), which the
// uintptrescapes directive keeps alive and unmoved until the call
// returns; the driver keeps none of them. Asynchronous copies take host memory only
// from a HostBuf (pinned memory from cuMemHostAlloc), never Go memory.
//
// # Graphs
//
// Ctx.RunGraph queues a list of kernel launches (KernelLaunch) as one
// CUDA graph launch (cuGraphCreate, cuGraphAddKernelNode_v2,
// cuGraphInstantiateWithFlags, cuGraphLaunch): each node waits for the
// launches its After names, by default the one before it, so a plain
// list runs as if launched one by one and independent branches may run
// at the same time. A Graphs keeps a bounded number of instantiated
// graphs, most recently used first; a list of the same kernels and
// dependencies reuses the held graph whose parameters differ least, and
// only the nodes whose grid, block, shared memory or argument bytes
// changed get cuGraphExecKernelNodeSetParams_v2 before the launch (a
// pointer that moved because a buffer was reallocated is such a change).
// A list that differs from the best in more than a quarter of its nodes
// builds another graph while there is room. The node parameters
// (CUDA_KERNEL_NODE_PARAMS_v2, 72 bytes; TestKernelNodeParamsLayout
// checks the offsets), the parameter block and the dependency array are
// written into the arena like a launch's; the driver copies them during
// the call. Arguments are checked as Launch checks them, before anything
// is queued. Drivers without the graph functions (before CUDA 11.4)
// still load; Driver.Graphs reports false and RunGraph returns
// ErrNoGraphs.
//
// # Errors
//
// A failed call returns an *Error with the driver function, the CUresult
// and its name and description from cuGetErrorName and cuGetErrorString.
// CUDA_ERROR_NO_DEVICE matches ErrNoDevice; CUDA_ERROR_STUB_LIBRARY,
// CUDA_ERROR_SYSTEM_DRIVER_MISMATCH and
// CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE match ErrNoDriver. A module
// the JIT cannot compile gives a *ModuleError carrying its error log.
//
// # Testing
//
// The tests of the library search, the argument layout, the errors, the
// owner thread and the checks Ctx makes before calling the driver run
// everywhere. The GPU tests (TestGPU*, BenchmarkGPU*) skip, saying why
// ("no CUDA driver: ..." or "no CUDA device: ..."), where Open or
// DeviceCount fails; with MUSER_REQUIRE_CUDA=1 they fail instead:
//
//	MUSER_REQUIRE_CUDA=1 go test -v -run GPU -bench GPU ./infer/engine/cuda/internal/cu
//
// Their kernels are hand-written PTX, testdata/kernels.ptx, which
// TestKernelsAssemble assembles with ptxas where a CUDA toolkit is
// installed; testdata/kernels.sm_90.cubin is the same file assembled for
// sm_90.
package cu
