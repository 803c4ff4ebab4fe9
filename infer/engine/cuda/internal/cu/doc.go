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
// # Kernel arguments
//
// cuLaunchKernel takes kernelParams, an array of pointers, one per
// parameter, each to the parameter's value. layoutArgs lays such a block
// out: the pointer array first (8 bytes an entry), then the values in
// argument order, each aligned to its size (a Struct to its Align), from
// a 16-aligned base. The types passed are uint8, int8, uint16, int16,
// uint32, int32, float32, uint64, int64, float64, DevicePtr and Struct
// (raw bytes with an alignment); int, uint, uintptr, pointers, slices and
// strings are refused with an *ArgError naming the argument's index.
// packArgs writes the block into a buffer; the buffer handed to the
// driver must lie outside the Go heap, so that the array the driver
// receives holds no Go pointers (cgo's rule for memory passed to C) and
// nothing it points at can be freed or moved during the call.
//
// # Errors
//
// A failed call returns an *Error with the driver function, the CUresult
// and its name and description from cuGetErrorName and cuGetErrorString.
// CUDA_ERROR_NO_DEVICE matches ErrNoDevice; CUDA_ERROR_STUB_LIBRARY,
// CUDA_ERROR_SYSTEM_DRIVER_MISMATCH and
// CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE match ErrNoDriver.
//
// # Testing
//
// The tests of the library search and the argument layout run
// everywhere; those that load a library skip where none is installed.
package cu
