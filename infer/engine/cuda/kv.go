package cuda

import (
	"fmt"
	"sync"

	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/kvcache"
)

// kv is one sequence's cache in device memory: per layer, a K and a V
// buffer of [positions][kv_heads·head_dim] elements (f16 or f32), the
// layout of infer/kvcache, so a block exports to the lkv1 payload by one
// copy per layer and half. Memory grows with the tokens held (doubling,
// at least 256 tokens), not with the context.
type kv struct {
	b        *backend
	mu       sync.Mutex // guards the fields below (export runs beside Forward)
	max, cap int
	rowBytes int // bytes of one position's K (or V) in one layer
	k, v     []cu.DevicePtr
	closed   bool
}

func (x *kv) Max() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.max
}

func (x *kv) Bytes() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return int64(x.cap) * int64(x.rowBytes) * int64(2*len(x.k))
}

func (x *kv) BlockBytes(n int) int { return len(x.k) * 2 * n * x.rowBytes }

// Reserve makes room for positions [0, n), copying what the cache holds
// into larger buffers when it grows.
func (x *kv) Reserve(n int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.reserveLocked(n)
}

func (x *kv) reserveLocked(n int) error {
	if x.closed || n < 0 || n > x.max {
		return &kvcache.RangeError{First: 0, N: n, Cap: x.cap, Max: x.max, Err: kvcache.ErrFull}
	}
	if n <= x.cap {
		return nil
	}
	newCap := min(max(2*x.cap, 256, n), x.max)
	return x.b.d.dev.Do(func(c *cu.Ctx) error {
		grow := func(old cu.DevicePtr) (cu.DevicePtr, error) {
			p, err := c.Alloc(uint64(newCap * x.rowBytes))
			if err != nil {
				return 0, err
			}
			if x.cap > 0 {
				if err := c.CopyDtoD(p, old, uint64(x.cap*x.rowBytes)); err != nil {
					c.Free(p)
					return 0, err
				}
			}
			return p, nil
		}
		nk, nv := make([]cu.DevicePtr, len(x.k)), make([]cu.DevicePtr, len(x.v))
		for l := range x.k {
			var err error
			if nk[l], err = grow(x.k[l]); err == nil {
				nv[l], err = grow(x.v[l])
			}
			if err != nil {
				for _, p := range append(nk, nv...) {
					if p != 0 {
						c.Free(p)
					}
				}
				return fmt.Errorf("growing a KV cache to %d tokens: %w", newCap, err)
			}
		}
		if err := c.SyncAll(); err != nil {
			return err
		}
		for l := range x.k {
			if x.cap > 0 {
				c.Free(x.k[l])
				c.Free(x.v[l])
			}
		}
		x.k, x.v, x.cap = nk, nv, newCap
		return nil
	})
}

// checkRange validates [first, first+n) against the allocation.
func (x *kv) checkRange(first, n int) error {
	if first < 0 || n <= 0 || first > x.cap || n > x.cap-first {
		err := kvcache.ErrBadShape
		if first >= 0 && n > 0 && first+n > x.max {
			err = kvcache.ErrFull
		}
		return &kvcache.RangeError{First: first, N: n, Cap: x.cap, Max: x.max, Err: err}
	}
	return nil
}

// ExportBlock appends the lkv1 payload of positions [first, first+n): for
// each layer, the K rows then the V rows, little-endian, as the device
// holds them.
func (x *kv) ExportBlock(dst []byte, first, n int) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.checkRange(first, n); err != nil {
		return dst, err
	}
	base := len(dst)
	dst = append(dst, make([]byte, x.BlockBytes(n))...)
	out := dst[base:]
	part := n * x.rowBytes
	off := uint64(first * x.rowBytes)
	err := x.b.d.dev.Do(func(c *cu.Ctx) error {
		if err := c.Sync(c.Stream()); err != nil {
			return err
		}
		for l := range x.k {
			if err := c.CopyDtoH(out[(2*l)*part:(2*l+1)*part], x.k[l]+cu.DevicePtr(off)); err != nil {
				return err
			}
			if err := c.CopyDtoH(out[(2*l+1)*part:(2*l+2)*part], x.v[l]+cu.DevicePtr(off)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return dst[:base], err
	}
	return dst, nil
}

// ImportBlock writes an lkv1 payload into positions [first, first+n),
// reserving them if needed; a payload of the wrong size changes nothing.
func (x *kv) ImportBlock(src []byte, first, n int) error {
	if n <= 0 || first < 0 {
		return &kvcache.RangeError{First: first, N: n, Cap: x.cap, Max: x.max, Err: kvcache.ErrBadShape}
	}
	if want := x.BlockBytes(n); len(src) != want {
		return fmt.Errorf("%w: %d bytes for %d tokens, want %d", kvcache.ErrChunkSize, len(src), n, want)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.reserveLocked(first + n); err != nil {
		return err
	}
	part := n * x.rowBytes
	off := uint64(first * x.rowBytes)
	return x.b.d.dev.Do(func(c *cu.Ctx) error {
		if err := c.Sync(c.Stream()); err != nil {
			return err
		}
		for l := range x.k {
			if err := c.CopyHtoD(x.k[l]+cu.DevicePtr(off), src[(2*l)*part:(2*l+1)*part]); err != nil {
				return err
			}
			if err := c.CopyHtoD(x.v[l]+cu.DevicePtr(off), src[(2*l+1)*part:(2*l+2)*part]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close frees the cache's device memory.
func (x *kv) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	if x.cap == 0 {
		return nil
	}
	bufs := append(append([]cu.DevicePtr(nil), x.k...), x.v...)
	x.cap, x.max = 0, 0
	return x.b.d.dev.Do(func(c *cu.Ctx) error {
		if err := c.Sync(c.Stream()); err != nil {
			return err
		}
		for _, p := range bufs {
			if err := c.Free(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// addrs returns the device addresses of layer l's K and V at position 0.
func (x *kv) addrs(l int) (uint64, uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return uint64(x.k[l]), uint64(x.v[l])
}
