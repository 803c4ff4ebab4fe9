package cu

import (
	"errors"
	"fmt"
	"unsafe"
)

// Device attributes read at open (CUdevice_attribute in cuda.h).
const (
	attrMaxSharedPerBlock      = 8
	attrMultiprocessorCount    = 16
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMaxSharedPerBlockOptin = 97
)

// Info describes a device; it is read once, when the device is opened.
type Info struct {
	Ordinal                int
	Name                   string // "NVIDIA H200"
	ComputeMajor           int    // compute capability: 9 for sm_90
	ComputeMinor           int
	SMs                    int    // streaming multiprocessors
	TotalMem               uint64 // bytes of device memory
	MaxSharedPerBlock      int    // bytes of shared memory a block gets without opting in (48 KiB)
	MaxSharedPerBlockOptin int    // bytes a block may get after SetMaxDynamicShared
}

// Device is one GPU with a CUDA context and a stream, owned by a goroutine
// locked to its OS thread; Do runs functions there. A Device is safe for
// use by many goroutines: their Do calls run one at a time, in the order
// they reach the owner.
type Device struct {
	info Info
	own  *owner
	ctx  *Ctx
}

// OpenDevice initialises the driver, creates a context and a stream on
// device ordinal (0 is the first), and starts the goroutine that owns
// them. With no such device it returns an error matching ErrNoDevice.
func (d *Driver) OpenDevice(ordinal int) (*Device, error) {
	dev := &Device{ctx: &Ctx{drv: d}}
	own, err := startOwner(func() error { return dev.ctx.setup(ordinal, &dev.info) }, dev.ctx.teardown)
	if err != nil {
		return nil, err
	}
	dev.own = own
	return dev, nil
}

// Info returns what the device reported when it was opened.
func (dev *Device) Info() Info { return dev.info }

// Do runs f on the device's thread, with the Ctx through which f makes
// driver calls, and returns f's error. One Do may make any number of
// calls (a forward pass of hundreds of launches) for one hand-over
// between goroutines. The Ctx is valid only until f returns.
//
// f must not call Do or Close (they return ErrNested), nor block on
// another goroutine's Do. A panic in f is raised again by Do in the
// calling goroutine, as a *PanicError carrying the device thread's stack.
// If f calls runtime.Goexit (t.FailNow, t.Fatal and t.Skip do), the
// device's goroutine ends: the device is torn down as by Close and Do
// returns an error matching ErrClosed. After Close, Do returns ErrClosed.
func (dev *Device) Do(f func(c *Ctx) error) error {
	c := dev.ctx
	return dev.own.do(func() error {
		c.live = true
		defer func() { c.live = false }()
		return f(c)
	})
}

// Close waits for the Do calls already handed over, then destroys the
// stream and the context, which frees every allocation, module, event
// and HostBuf made through the device, and ends its thread. Later calls
// return nil.
func (dev *Device) Close() error { return dev.own.close() }

// setup runs on the owner's thread: it initialises the driver, reads the
// device's attributes, creates the context (current on this thread from
// then on) and the stream, and maps the argument arena.
func (c *Ctx) setup(ordinal int, info *Info) (err error) {
	d := c.drv
	n, err := d.DeviceCount()
	if err != nil {
		return err
	}
	if ordinal < 0 || ordinal >= n {
		return fmt.Errorf("%w: ordinal %d, the driver sees %d", ErrNoDevice, ordinal, n)
	}
	if err := d.check("cuDeviceGet", call(d.fn.deviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ordinal))); err != nil {
		return err
	}
	if err := c.readInfo(ordinal, info); err != nil {
		return err
	}
	if d.fn.ctxCreateV2 != 0 {
		err = d.check("cuCtxCreate_v2", call(d.fn.ctxCreateV2, uintptr(unsafe.Pointer(&c.h)), 0, uintptr(c.dev)))
	} else {
		// A zeroed CUctxCreateParams: no execution affinity, no CIG.
		params := new([3]uintptr)
		err = d.check("cuCtxCreate_v4", call(d.fn.ctxCreateV4, uintptr(unsafe.Pointer(&c.h)), uintptr(unsafe.Pointer(params)), 0, uintptr(c.dev)))
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = call(d.fn.ctxDestroy, c.h)
		}
	}()
	if err := d.check("cuStreamCreate", call(d.fn.streamCreate, uintptr(unsafe.Pointer(&c.stream.h)), 0)); err != nil {
		return err
	}
	arena, err := sysArena(arenaSize)
	if err != nil {
		return fmt.Errorf("cu: mapping the argument arena: %w", err)
	}
	c.arena = arena
	c.arenaAddr = uintptr(unsafe.Pointer(&arena[0]))
	return nil
}

func (c *Ctx) readInfo(ordinal int, info *Info) error {
	d := c.drv
	var name [256]byte
	if err := d.check("cuDeviceGetName", call(d.fn.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(c.dev))); err != nil {
		return err
	}
	var total uint64
	if err := d.check("cuDeviceTotalMem_v2", call(d.fn.deviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(c.dev))); err != nil {
		return err
	}
	*info = Info{Ordinal: ordinal, Name: cString(&name[0], len(name)), TotalMem: total}
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrComputeCapabilityMajor, &info.ComputeMajor},
		{attrComputeCapabilityMinor, &info.ComputeMinor},
		{attrMultiprocessorCount, &info.SMs},
		{attrMaxSharedPerBlock, &info.MaxSharedPerBlock},
		{attrMaxSharedPerBlockOptin, &info.MaxSharedPerBlockOptin},
	} {
		var v int32
		if err := d.check("cuDeviceGetAttribute", call(d.fn.deviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a.attr), uintptr(c.dev))); err != nil {
			return err
		}
		*a.dst = int(v)
	}
	return nil
}

// teardown runs on the owner's thread after the last request.
func (c *Ctx) teardown() error {
	d := c.drv
	var errs []error
	errs = append(errs, d.check("cuStreamDestroy_v2", call(d.fn.streamDestroy, c.stream.h)))
	errs = append(errs, d.check("cuCtxDestroy_v2", call(d.fn.ctxDestroy, c.h)))
	for _, h := range c.hosts {
		h.b = nil // freed with the context
	}
	c.hosts = nil
	if c.arena != nil {
		errs = append(errs, sysFreeArena(c.arena))
		c.arena, c.arenaAddr = nil, 0
	}
	return errors.Join(errs...)
}
