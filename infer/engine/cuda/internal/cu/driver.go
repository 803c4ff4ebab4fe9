package cu

import (
	"fmt"
	"strings"
	"unsafe"
)

// Driver is a loaded CUDA driver library. Its methods may be called from
// any goroutine; they make no call that needs a context.
type Driver struct {
	path    string // the file loaded, symbolic links resolved
	version int    // cuDriverGetVersion: 1000·major + 10·minor
	fn      funcs
	chosen  []string // the versioned names picked where several exist
}

// funcs holds the address of every driver function this package calls.
type funcs struct {
	init, driverGetVersion, getErrorName, getErrorString                         uintptr
	deviceGet, deviceGetCount, deviceGetName, deviceGetAttribute, deviceTotalMem uintptr
	ctxCreateV2, ctxCreateV4, ctxDestroy, ctxSynchronize, memGetInfo             uintptr
	memAlloc, memFree, memcpyHtoD, memcpyDtoH, memcpyDtoD                        uintptr
	memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync                            uintptr
	memsetD8, memsetD8Async, memsetD32Async, memHostAlloc, memFreeHost           uintptr
	streamCreate, streamSynchronize, streamDestroy                               uintptr
	moduleLoadDataEx, moduleGetFunction, moduleUnload                            uintptr
	launchKernel, funcSetAttribute, funcGetParamInfo                             uintptr
	eventCreate, eventRecord, eventSynchronize, eventElapsedTime, eventDestroy   uintptr
	// CUDA graphs (graph.go); all optional, used only when every one is there.
	graphCreate, graphAddKernelNode, graphInstantiate, graphExecKernelNodeSetParams uintptr
	graphLaunch, graphExecDestroy, graphDestroy                                     uintptr
	// Edges with data (CUDA 12.3): the early-launch dependencies of
	// KernelLaunch.Early; optional on its own.
	graphAddDependencies uintptr
}

// symbol is one driver function: the names to look up, in order, and
// whether the package works without it.
type symbol struct {
	dst      *uintptr
	names    []string
	optional bool
}

// symbols lists every function with the exported name that has the
// signature this package calls it with. cuda.h maps the plain names onto
// these (#define cuMemAlloc cuMemAlloc_v2, ...); a driver keeps exporting
// the older versions for old binaries, so the names are stable. Checked
// against the CUDA 12.x and 13.0 headers:
//
//   - cuCtxCreate: CUDA 12 headers map it to cuCtxCreate_v2(CUcontext*,
//     unsigned flags, CUdevice); CUDA 13.0 maps it to
//     cuCtxCreate_v4(CUcontext*, CUctxCreateParams*, unsigned flags,
//     CUdevice), added in 12.5. Drivers for 13.x still export _v2, which
//     is preferred; _v4 with a zeroed CUctxCreateParams (no execution
//     affinity, no CIG: a regular context) is the fallback.
//   - cuEventElapsedTime: CUDA 12.8 added cuEventElapsedTime_v2 with the
//     same signature, and CUDA 13.0 maps the plain name to it; _v2 is
//     preferred, the unversioned symbol the fallback.
//   - cuCtxSynchronize is looked up by its plain name: newer drivers also
//     export a cuCtxSynchronize_v2 that takes a CUcontext.
//   - cuFuncGetParamInfo (CUDA 12.4) is optional: without it Launch cannot
//     check arguments against the kernel's parameters.
//   - The graph functions are optional (Driver.Graphs reports whether all
//     are there). cuGraphAddKernelNode and cuGraphExecKernelNodeSetParams:
//     CUDA 12 and 13 headers map the plain names to their _v2 symbols,
//     which take CUDA_KERNEL_NODE_PARAMS_v2 (72 bytes: the _v1 struct's 56
//     plus kern and ctx); _v2 is preferred, the plain (_v1) symbol the
//     fallback. graph.go always writes the _v2 struct with kern and ctx
//     zero, whose first 56 bytes are the _v1 struct, so either symbol reads
//     it right. cuGraphInstantiateWithFlags (CUDA 11.4) is the symbol the
//     CUDA 12 and 13 headers map cuGraphInstantiate to.
//   - cuGraphAddDependencies_v2 (CUDA 12.3; the symbol the CUDA 13 headers
//     map cuGraphAddDependencies to) takes a CUgraphEdgeData per edge: it
//     adds the early-launch (programmatic) edges. Optional: without it
//     every edge is a full dependency (Driver.EarlyLaunch).
func (f *funcs) symbols() []symbol {
	return []symbol{
		{dst: &f.init, names: []string{"cuInit"}},
		{dst: &f.driverGetVersion, names: []string{"cuDriverGetVersion"}},
		{dst: &f.getErrorName, names: []string{"cuGetErrorName"}},
		{dst: &f.getErrorString, names: []string{"cuGetErrorString"}},
		{dst: &f.deviceGet, names: []string{"cuDeviceGet"}},
		{dst: &f.deviceGetCount, names: []string{"cuDeviceGetCount"}},
		{dst: &f.deviceGetName, names: []string{"cuDeviceGetName"}},
		{dst: &f.deviceGetAttribute, names: []string{"cuDeviceGetAttribute"}},
		{dst: &f.deviceTotalMem, names: []string{"cuDeviceTotalMem_v2"}},
		{dst: &f.ctxCreateV2, names: []string{"cuCtxCreate_v2"}, optional: true},
		{dst: &f.ctxCreateV4, names: []string{"cuCtxCreate_v4"}, optional: true},
		{dst: &f.ctxDestroy, names: []string{"cuCtxDestroy_v2"}},
		{dst: &f.ctxSynchronize, names: []string{"cuCtxSynchronize"}},
		{dst: &f.memGetInfo, names: []string{"cuMemGetInfo_v2"}},
		{dst: &f.memAlloc, names: []string{"cuMemAlloc_v2"}},
		{dst: &f.memFree, names: []string{"cuMemFree_v2"}},
		{dst: &f.memcpyHtoD, names: []string{"cuMemcpyHtoD_v2"}},
		{dst: &f.memcpyDtoH, names: []string{"cuMemcpyDtoH_v2"}},
		{dst: &f.memcpyDtoD, names: []string{"cuMemcpyDtoD_v2"}},
		{dst: &f.memcpyHtoDAsync, names: []string{"cuMemcpyHtoDAsync_v2"}},
		{dst: &f.memcpyDtoHAsync, names: []string{"cuMemcpyDtoHAsync_v2"}},
		{dst: &f.memcpyDtoDAsync, names: []string{"cuMemcpyDtoDAsync_v2"}},
		{dst: &f.memsetD8, names: []string{"cuMemsetD8_v2"}},
		{dst: &f.memsetD8Async, names: []string{"cuMemsetD8Async"}},
		{dst: &f.memsetD32Async, names: []string{"cuMemsetD32Async"}},
		{dst: &f.memHostAlloc, names: []string{"cuMemHostAlloc"}},
		{dst: &f.memFreeHost, names: []string{"cuMemFreeHost"}},
		{dst: &f.streamCreate, names: []string{"cuStreamCreate"}},
		{dst: &f.streamSynchronize, names: []string{"cuStreamSynchronize"}},
		{dst: &f.streamDestroy, names: []string{"cuStreamDestroy_v2"}},
		{dst: &f.moduleLoadDataEx, names: []string{"cuModuleLoadDataEx"}},
		{dst: &f.moduleGetFunction, names: []string{"cuModuleGetFunction"}},
		{dst: &f.moduleUnload, names: []string{"cuModuleUnload"}},
		{dst: &f.launchKernel, names: []string{"cuLaunchKernel"}},
		{dst: &f.funcSetAttribute, names: []string{"cuFuncSetAttribute"}},
		{dst: &f.funcGetParamInfo, names: []string{"cuFuncGetParamInfo"}, optional: true},
		{dst: &f.eventCreate, names: []string{"cuEventCreate"}},
		{dst: &f.eventRecord, names: []string{"cuEventRecord"}},
		{dst: &f.eventSynchronize, names: []string{"cuEventSynchronize"}},
		{dst: &f.eventElapsedTime, names: []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{dst: &f.eventDestroy, names: []string{"cuEventDestroy_v2"}},
		{dst: &f.graphCreate, names: []string{"cuGraphCreate"}, optional: true},
		{dst: &f.graphAddKernelNode, names: []string{"cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"}, optional: true},
		{dst: &f.graphInstantiate, names: []string{"cuGraphInstantiateWithFlags"}, optional: true},
		{dst: &f.graphExecKernelNodeSetParams, names: []string{"cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"}, optional: true},
		{dst: &f.graphLaunch, names: []string{"cuGraphLaunch"}, optional: true},
		{dst: &f.graphExecDestroy, names: []string{"cuGraphExecDestroy"}, optional: true},
		{dst: &f.graphDestroy, names: []string{"cuGraphDestroy"}, optional: true},
		{dst: &f.graphAddDependencies, names: []string{"cuGraphAddDependencies_v2"}, optional: true},
	}
}

// resolve looks every symbol up in the library h and returns the required
// functions it lacks.
func (d *Driver) resolve(h uintptr) (missing []string) {
	for _, s := range d.fn.symbols() {
		for _, name := range s.names {
			if p := sysDlsym(h, name); p != 0 {
				*s.dst = p
				if len(s.names) > 1 {
					d.chosen = append(d.chosen, name)
				}
				break
			}
		}
		if *s.dst == 0 && !s.optional {
			missing = append(missing, strings.Join(s.names, "|"))
		}
	}
	switch {
	case d.fn.ctxCreateV2 != 0:
		d.chosen = append(d.chosen, "cuCtxCreate_v2")
	case d.fn.ctxCreateV4 != 0:
		d.chosen = append(d.chosen, "cuCtxCreate_v4")
	default:
		missing = append(missing, "cuCtxCreate_v2|cuCtxCreate_v4")
	}
	if d.fn.funcGetParamInfo == 0 {
		d.chosen = append(d.chosen, "no cuFuncGetParamInfo")
	} else {
		d.chosen = append(d.chosen, "cuFuncGetParamInfo")
	}
	switch {
	case !d.Graphs():
		d.chosen = append(d.chosen, "no CUDA graphs")
	case !d.EarlyLaunch():
		d.chosen = append(d.chosen, "no early launch in graphs")
	}
	return missing
}

// Graphs reports whether the driver exports every graph function Ctx.RunGraph
// calls (CUDA 11.4 and later).
func (d *Driver) Graphs() bool {
	f := &d.fn
	for _, p := range []uintptr{f.graphCreate, f.graphAddKernelNode, f.graphInstantiate, f.graphExecKernelNodeSetParams,
		f.graphLaunch, f.graphExecDestroy, f.graphDestroy} {
		if p == 0 {
			return false
		}
	}
	return true
}

// EarlyLaunch reports whether graphs can hold early-launch (programmatic)
// dependencies (KernelLaunch.Early): the graph functions and
// cuGraphAddDependencies_v2 (CUDA 12.3 and later).
func (d *Driver) EarlyLaunch() bool { return d.Graphs() && d.fn.graphAddDependencies != 0 }

// Path returns the library file loaded, with symbolic links resolved.
func (d *Driver) Path() string { return d.path }

// Version returns the driver's CUDA version as cuDriverGetVersion reports
// it: 1000·major + 10·minor (13000 for CUDA 13.0).
func (d *Driver) Version() int { return d.version }

// String describes the driver: its path, CUDA version, and the versioned
// functions chosen where the driver offers several.
func (d *Driver) String() string {
	return fmt.Sprintf("%s (CUDA %d.%d; %s)", d.path, d.version/1000, d.version%1000/10, strings.Join(d.chosen, ", "))
}

// DeviceCount initialises the driver (cuInit) and returns the number of
// devices it sees. With no device it returns an error matching
// ErrNoDevice.
func (d *Driver) DeviceCount() (int, error) {
	if err := d.check("cuInit", call(d.fn.init, 0)); err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", call(d.fn.deviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// check turns a CUresult into nil or an *Error for op.
func (d *Driver) check(op string, r uint32) error {
	if r == 0 {
		return nil
	}
	return d.newError(op, r)
}

// knownNames names the codes this package tests for, for a library (a
// stub) whose cuGetErrorName cannot.
var knownNames = map[uint32]string{
	codeInvalidValue:    "CUDA_ERROR_INVALID_VALUE",
	codeOutOfMemory:     "CUDA_ERROR_OUT_OF_MEMORY",
	codeStubLibrary:     "CUDA_ERROR_STUB_LIBRARY",
	codeNoDevice:        "CUDA_ERROR_NO_DEVICE",
	codeInvalidPTX:      "CUDA_ERROR_INVALID_PTX",
	codeDriverMismatch:  "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	codeCompatNoSupport: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
}

// newError builds the *Error for code r, named by cuGetErrorName and
// described by cuGetErrorString, both of which return pointers to static
// strings in the library.
func (d *Driver) newError(op string, r uint32) *Error {
	e := &Error{Op: op, Code: int(r)}
	var p *byte
	if call(d.fn.getErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))) == 0 && p != nil {
		e.Name = cString(p, 256)
	}
	if e.Name == "" {
		e.Name = knownNames[r]
	}
	if e.Name == "" {
		e.Name = "unknown CUresult"
	}
	var q *byte
	if call(d.fn.getErrorString, uintptr(r), uintptr(unsafe.Pointer(&q))) == 0 && q != nil {
		e.Message = cString(q, 1024)
	}
	return e
}

// cString copies the NUL-terminated string at p, reading at most max
// bytes. p points outside the Go heap (into the driver's memory).
func cString(p *byte, max int) string {
	if p == nil {
		return ""
	}
	n := 0
	for n < max && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
