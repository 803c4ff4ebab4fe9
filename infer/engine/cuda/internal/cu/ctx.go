package cu

import (
	"fmt"
	"slices"
	"time"
	"unsafe"
)

// Ctx makes driver calls on a device's thread. Device.Do hands one to its
// function; every method returns ErrOutsideDo once that function has
// returned, and none may be called from another goroutine.
//
// Handles (DevicePtr, Stream, Event, Module, Function, *HostBuf) belong
// to the device that made them and are invalid after its Close.
type Ctx struct {
	drv       *Driver
	dev       int32   // CUdevice
	h         uintptr // CUcontext
	stream    Stream  // the device's stream
	arena     []byte  // argument arena, outside the Go heap (sysArena)
	arenaAddr uintptr
	slots     []slot     // reused by Launch
	hosts     []*HostBuf // live pinned buffers
	live      bool       // inside Do
}

// Stream is a CUDA stream. The zero Stream is the legacy default stream,
// which the synchronous copies and MemsetD8 use.
type Stream struct{ h uintptr }

// Event is a CUDA event, recorded on a stream to time or order work.
type Event struct{ h uintptr }

// HostBuf is page-locked ("pinned") host memory from cuMemHostAlloc,
// outside the Go heap. Asynchronous copies take host memory only from a
// HostBuf, so the driver never reads or writes Go memory after the call
// that queued the copy has returned.
type HostBuf struct {
	b    []byte
	addr uintptr
}

// Bytes returns the buffer's memory, or nil once it is freed. The slice,
// and any slice of it, must not be used after FreeHost or Device.Close.
func (h *HostBuf) Bytes() []byte { return h.b }

func (c *Ctx) enter() error {
	if !c.live {
		return ErrOutsideDo
	}
	return nil
}

// Stream returns the stream the device created at open. It synchronises
// with the legacy default stream (flags 0, not CU_STREAM_NON_BLOCKING),
// so a synchronous copy issued after a launch on it waits for the launch.
func (c *Ctx) Stream() Stream { return c.stream }

// NewStream creates another stream, with the same synchronisation as the
// device's.
func (c *Ctx) NewStream() (Stream, error) {
	if err := c.enter(); err != nil {
		return Stream{}, err
	}
	var s Stream
	err := c.drv.check("cuStreamCreate", call(c.drv.fn.streamCreate, uintptr(unsafe.Pointer(&s.h)), 0))
	return s, err
}

// DestroyStream destroys a stream made by NewStream; work queued on it
// still completes.
func (c *Ctx) DestroyStream(s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuStreamDestroy_v2", call(c.drv.fn.streamDestroy, s.h))
}

// Sync waits until everything queued on s has completed and returns the
// first error of that work.
func (c *Ctx) Sync(s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuStreamSynchronize", call(c.drv.fn.streamSynchronize, s.h))
}

// SyncAll waits until all work of the context, on every stream, has
// completed (cuCtxSynchronize).
func (c *Ctx) SyncAll() error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuCtxSynchronize", call(c.drv.fn.ctxSynchronize))
}

// MemInfo returns the device's free and total memory in bytes.
func (c *Ctx) MemInfo() (free, total uint64, err error) {
	if err := c.enter(); err != nil {
		return 0, 0, err
	}
	err = c.drv.check("cuMemGetInfo_v2", call(c.drv.fn.memGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	return free, total, err
}

// Alloc allocates n bytes of device memory, aligned to at least 256
// bytes; the memory is not cleared.
func (c *Ctx) Alloc(n uint64) (DevicePtr, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var p DevicePtr
	err := c.drv.check("cuMemAlloc_v2", call(c.drv.fn.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)))
	return p, err
}

// Free frees memory from Alloc.
func (c *Ctx) Free(p DevicePtr) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuMemFree_v2", call(c.drv.fn.memFree, uintptr(p)))
}

// CopyHtoD copies src to device memory at dst and returns when src may be
// reused. It runs on the legacy default stream, after the work queued on
// the device's streams.
func (c *Ctx) CopyHtoD(dst DevicePtr, src []byte) error {
	if err := c.enter(); err != nil || len(src) == 0 {
		return err
	}
	return c.drv.check("cuMemcpyHtoD_v2", call(c.drv.fn.memcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src))))
}

// CopyDtoH copies len(dst) bytes from device memory at src into dst and
// returns when they are there. It runs on the legacy default stream,
// after the work queued on the device's streams.
func (c *Ctx) CopyDtoH(dst []byte, src DevicePtr) error {
	if err := c.enter(); err != nil || len(dst) == 0 {
		return err
	}
	return c.drv.check("cuMemcpyDtoH_v2", call(c.drv.fn.memcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst))))
}

// CopyDtoD copies n bytes of device memory from src to dst on the legacy
// default stream; it may return before the copy is done.
func (c *Ctx) CopyDtoD(dst, src DevicePtr, n uint64) error {
	if err := c.enter(); err != nil || n == 0 {
		return err
	}
	return c.drv.check("cuMemcpyDtoD_v2", call(c.drv.fn.memcpyDtoD, uintptr(dst), uintptr(src), uintptr(n)))
}

// CopyHtoDAsync queues a copy of src, which must lie in a live HostBuf of
// this Ctx (else ErrNotPinned), to device memory at dst on stream s. src
// must not change until the copy has run.
func (c *Ctx) CopyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if err := c.enter(); err != nil || len(src) == 0 {
		return err
	}
	addr, err := c.pinned(src)
	if err != nil {
		return err
	}
	return c.drv.check("cuMemcpyHtoDAsync_v2", call(c.drv.fn.memcpyHtoDAsync, uintptr(dst), addr, uintptr(len(src)), s.h))
}

// CopyDtoHAsync queues a copy of len(dst) bytes from device memory at src
// into dst, which must lie in a live HostBuf of this Ctx (else
// ErrNotPinned), on stream s. dst holds the bytes once s is synchronised.
func (c *Ctx) CopyDtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	if err := c.enter(); err != nil || len(dst) == 0 {
		return err
	}
	addr, err := c.pinned(dst)
	if err != nil {
		return err
	}
	return c.drv.check("cuMemcpyDtoHAsync_v2", call(c.drv.fn.memcpyDtoHAsync, addr, uintptr(src), uintptr(len(dst)), s.h))
}

// CopyDtoDAsync queues a copy of n bytes of device memory from src to dst
// on stream s.
func (c *Ctx) CopyDtoDAsync(dst, src DevicePtr, n uint64, s Stream) error {
	if err := c.enter(); err != nil || n == 0 {
		return err
	}
	return c.drv.check("cuMemcpyDtoDAsync_v2", call(c.drv.fn.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.h))
}

// MemsetD8 sets n bytes at p to v, on the legacy default stream.
func (c *Ctx) MemsetD8(p DevicePtr, v byte, n uint64) error {
	if err := c.enter(); err != nil || n == 0 {
		return err
	}
	return c.drv.check("cuMemsetD8_v2", call(c.drv.fn.memsetD8, uintptr(p), uintptr(v), uintptr(n)))
}

// MemsetD8Async queues setting n bytes at p to v on stream s.
func (c *Ctx) MemsetD8Async(p DevicePtr, v byte, n uint64, s Stream) error {
	if err := c.enter(); err != nil || n == 0 {
		return err
	}
	return c.drv.check("cuMemsetD8Async", call(c.drv.fn.memsetD8Async, uintptr(p), uintptr(v), uintptr(n), s.h))
}

// MemsetD32Async queues setting n 32-bit words at p (4-aligned) to v on
// stream s: math.Float32bits(x) fills with the float32 x.
func (c *Ctx) MemsetD32Async(p DevicePtr, v uint32, n uint64, s Stream) error {
	if err := c.enter(); err != nil || n == 0 {
		return err
	}
	return c.drv.check("cuMemsetD32Async", call(c.drv.fn.memsetD32Async, uintptr(p), uintptr(v), uintptr(n), s.h))
}

// HostAlloc allocates n bytes of pinned host memory (cuMemHostAlloc, flags
// 0). It is freed by FreeHost or with the device.
func (c *Ctx) HostAlloc(n int) (*HostBuf, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: HostAlloc(%d)", ErrSize, n)
	}
	var p unsafe.Pointer
	if err := c.drv.check("cuMemHostAlloc", call(c.drv.fn.memHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n), 0)); err != nil {
		return nil, err
	}
	h := &HostBuf{b: unsafe.Slice((*byte)(p), n), addr: uintptr(p)}
	c.hosts = append(c.hosts, h)
	return h, nil
}

// FreeHost frees a HostBuf of this Ctx; its Bytes become nil. Freeing one
// twice, or another Ctx's, returns ErrNotPinned.
func (c *Ctx) FreeHost(h *HostBuf) error {
	if err := c.enter(); err != nil {
		return err
	}
	i := slices.Index(c.hosts, h)
	if i < 0 {
		return fmt.Errorf("%w: FreeHost of a buffer this Ctx does not hold", ErrNotPinned)
	}
	c.hosts = slices.Delete(c.hosts, i, i+1)
	addr := h.addr
	h.b, h.addr = nil, 0
	return c.drv.check("cuMemFreeHost", call(c.drv.fn.memFreeHost, addr))
}

// pinned returns b's address if b lies inside a live HostBuf.
func (c *Ctx) pinned(b []byte) (uintptr, error) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, h := range c.hosts {
		if p >= h.addr && p-h.addr <= uintptr(len(h.b)) && uintptr(len(b)) <= uintptr(len(h.b))-(p-h.addr) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: %d bytes at %#x", ErrNotPinned, len(b), p)
}

// NewEvent creates an event that records timing (cuEventCreate, flags 0).
func (c *Ctx) NewEvent() (Event, error) {
	if err := c.enter(); err != nil {
		return Event{}, err
	}
	var e Event
	err := c.drv.check("cuEventCreate", call(c.drv.fn.eventCreate, uintptr(unsafe.Pointer(&e.h)), 0))
	return e, err
}

// Record queues e on stream s: it completes when the work queued on s
// before it has.
func (c *Ctx) Record(e Event, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuEventRecord", call(c.drv.fn.eventRecord, e.h, s.h))
}

// WaitEvent waits until e has completed.
func (c *Ctx) WaitEvent(e Event) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuEventSynchronize", call(c.drv.fn.eventSynchronize, e.h))
}

// Elapsed returns the device time between two completed events, with a
// resolution of about half a microsecond.
func (c *Ctx) Elapsed(start, end Event) (time.Duration, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var ms float32
	if err := c.drv.check("cuEventElapsedTime", call(c.drv.fn.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, end.h)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// DestroyEvent destroys an event.
func (c *Ctx) DestroyEvent(e Event) error {
	if err := c.enter(); err != nil {
		return err
	}
	return c.drv.check("cuEventDestroy_v2", call(c.drv.fn.eventDestroy, e.h))
}
