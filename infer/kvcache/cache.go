package kvcache

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// DType is the element type of the cache.
type DType uint8

// The supported element types.
const (
	DTypeF16 DType = iota // IEEE binary16, little-endian in chunks
	DTypeF32              // IEEE binary32, little-endian in chunks
)

// String returns "f16" or "f32", the names used in the identity's kv field.
func (d DType) String() string {
	switch d {
	case DTypeF16:
		return "f16"
	case DTypeF32:
		return "f32"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the bytes per element.
func (d DType) Size() int {
	if d == DTypeF32 {
		return 4
	}
	return 2
}

// ParseDType parses "f16" or "f32".
func ParseDType(s string) (DType, error) {
	switch s {
	case "f16":
		return DTypeF16, nil
	case "f32":
		return DTypeF32, nil
	}
	return 0, fmt.Errorf("%w: kv dtype %q, want f16 or f32", ErrBadShape, s)
}

// Shape is the geometry of a cache.
type Shape struct {
	Layers  int
	KVHeads int
	HeadDim int
}

// RowElems returns the elements of one token's K (or V) row in one layer.
func (s Shape) RowElems() int { return s.KVHeads * s.HeadDim }

// Cache is the KV cache of one sequence. It is not safe for concurrent
// writes; concurrent reads of rows already written are safe.
type Cache struct {
	shape  Shape
	dtype  DType
	max    int
	cap    int
	k16    [][]uint16
	v16    [][]uint16
	k32    [][]float32
	v32    [][]float32
	rowLen int
}

// New returns an empty cache of the given shape and dtype that can hold up
// to maxTokens tokens.
func New(shape Shape, dtype DType, maxTokens int) (*Cache, error) {
	if shape.Layers <= 0 || shape.KVHeads <= 0 || shape.HeadDim <= 0 || maxTokens <= 0 {
		return nil, fmt.Errorf("%w: %d layers, %d kv heads, head dim %d, %d tokens (all must be positive)",
			ErrBadShape, shape.Layers, shape.KVHeads, shape.HeadDim, maxTokens)
	}
	if dtype != DTypeF16 && dtype != DTypeF32 {
		return nil, fmt.Errorf("%w: dtype %v", ErrBadShape, dtype)
	}
	row := shape.RowElems()
	if row > math.MaxInt32 || maxTokens > math.MaxInt/(row*2*shape.Layers*4) {
		return nil, fmt.Errorf("%w: %d tokens of %d elements overflow", ErrBadShape, maxTokens, row)
	}
	c := &Cache{shape: shape, dtype: dtype, max: maxTokens, rowLen: row}
	if dtype == DTypeF16 {
		c.k16, c.v16 = make([][]uint16, shape.Layers), make([][]uint16, shape.Layers)
	} else {
		c.k32, c.v32 = make([][]float32, shape.Layers), make([][]float32, shape.Layers)
	}
	return c, nil
}

// Shape returns the cache's shape.
func (c *Cache) Shape() Shape { return c.shape }

// DType returns the element type.
func (c *Cache) DType() DType { return c.dtype }

// Max returns the most tokens the cache can hold.
func (c *Cache) Max() int { return c.max }

// Cap returns the tokens currently allocated.
func (c *Cache) Cap() int { return c.cap }

// Bytes returns the bytes currently allocated.
func (c *Cache) Bytes() int64 {
	return int64(c.cap) * int64(c.rowLen) * int64(2*c.shape.Layers) * int64(c.dtype.Size())
}

// Close releases the cache's memory: it holds no tokens afterwards and
// every later Reserve, Import or Export fails as for a cache of Max 0.
func (c *Cache) Close() error {
	c.k16, c.v16, c.k32, c.v32 = nil, nil, nil, nil
	c.max, c.cap = 0, 0
	return nil
}

// Reserve makes room for positions [0, n). It returns a *RangeError
// wrapping ErrFull if n exceeds Max. Rows already written are kept.
func (c *Cache) Reserve(n int) error {
	if n < 0 || n > c.max {
		return &RangeError{First: 0, N: n, Cap: c.cap, Max: c.max, Err: ErrFull}
	}
	if n <= c.cap {
		return nil
	}
	newCap := max(c.cap*2, 256, n)
	newCap = min(newCap, c.max)
	size := newCap * c.rowLen
	for l := range c.shape.Layers {
		if c.dtype == DTypeF16 {
			c.k16[l] = append(make([]uint16, 0, size), c.k16[l]...)[:size]
			c.v16[l] = append(make([]uint16, 0, size), c.v16[l]...)[:size]
		} else {
			c.k32[l] = append(make([]float32, 0, size), c.k32[l]...)[:size]
			c.v32[l] = append(make([]float32, 0, size), c.v32[l]...)[:size]
		}
	}
	c.cap = newCap
	return nil
}

// K16 returns layer l's K rows (DTypeF16 caches only; nil otherwise): row
// p is [p·RowElems, (p+1)·RowElems). The slice is invalidated by Reserve.
func (c *Cache) K16(l int) []uint16 {
	if c.k16 == nil {
		return nil
	}
	return c.k16[l]
}

// V16 is K16 for V.
func (c *Cache) V16(l int) []uint16 {
	if c.v16 == nil {
		return nil
	}
	return c.v16[l]
}

// K32 returns layer l's K rows of a DTypeF32 cache (nil otherwise).
func (c *Cache) K32(l int) []float32 {
	if c.k32 == nil {
		return nil
	}
	return c.k32[l]
}

// V32 is K32 for V.
func (c *Cache) V32(l int) []float32 {
	if c.v32 == nil {
		return nil
	}
	return c.v32[l]
}

// BlockBytes returns the chunk payload size of a block of n tokens.
func (c *Cache) BlockBytes(n int) int {
	return c.shape.Layers * 2 * n * c.rowLen * c.dtype.Size()
}

// checkRange validates [first, first+n) against the allocation.
func (c *Cache) checkRange(first, n int) error {
	if first < 0 || n <= 0 || first > c.cap || n > c.cap-first {
		err := ErrBadShape
		if first >= 0 && n > 0 && first+n > c.max {
			err = ErrFull
		}
		return &RangeError{First: first, N: n, Cap: c.cap, Max: c.max, Err: err}
	}
	return nil
}

// littleEndian reports whether the host stores integers little-endian, in
// which case rows are copied as raw memory.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// ExportBlock appends the lkv1 payload of positions [first, first+n) to
// dst and returns it. The positions must have been reserved.
func (c *Cache) ExportBlock(dst []byte, first, n int) ([]byte, error) {
	if err := c.checkRange(first, n); err != nil {
		return dst, err
	}
	lo, hi := first*c.rowLen, (first+n)*c.rowLen
	for l := range c.shape.Layers {
		if c.dtype == DTypeF16 {
			dst = appendU16(dst, c.k16[l][lo:hi])
			dst = appendU16(dst, c.v16[l][lo:hi])
		} else {
			dst = appendF32(dst, c.k32[l][lo:hi])
			dst = appendF32(dst, c.v32[l][lo:hi])
		}
	}
	return dst, nil
}

// ImportBlock writes an lkv1 payload into positions [first, first+n),
// reserving them if needed. It returns an error wrapping ErrChunkSize if
// src does not have BlockBytes(n) bytes; the cache is then unchanged.
func (c *Cache) ImportBlock(src []byte, first, n int) error {
	if n <= 0 || first < 0 {
		return &RangeError{First: first, N: n, Cap: c.cap, Max: c.max, Err: ErrBadShape}
	}
	if want := c.BlockBytes(n); len(src) != want {
		return fmt.Errorf("%w: %d bytes for %d tokens, want %d (%d layers × K,V × %d tokens × %d kv heads × %d dims × %d bytes)",
			ErrChunkSize, len(src), n, want, c.shape.Layers, n, c.shape.KVHeads, c.shape.HeadDim, c.dtype.Size())
	}
	if err := c.Reserve(first + n); err != nil {
		return err
	}
	lo, hi := first*c.rowLen, (first+n)*c.rowLen
	part := n * c.rowLen * c.dtype.Size()
	for l := range c.shape.Layers {
		k, v := src[:part], src[part:2*part]
		src = src[2*part:]
		if c.dtype == DTypeF16 {
			readU16(c.k16[l][lo:hi], k)
			readU16(c.v16[l][lo:hi], v)
		} else {
			readF32(c.k32[l][lo:hi], k)
			readF32(c.v32[l][lo:hi], v)
		}
	}
	return nil
}

func appendU16(dst []byte, s []uint16) []byte {
	if littleEndian && len(s) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 2*len(s))...)
	}
	for _, x := range s {
		dst = binary.LittleEndian.AppendUint16(dst, x)
	}
	return dst
}

func appendF32(dst []byte, s []float32) []byte {
	if littleEndian && len(s) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))...)
	}
	for _, x := range s {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

func readU16(dst []uint16, src []byte) {
	if littleEndian && len(dst) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 2*len(dst)), src)
		return
	}
	for i := range dst {
		dst[i] = binary.LittleEndian.Uint16(src[2*i:])
	}
}

func readF32(dst []float32, src []byte) {
	if littleEndian && len(dst) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)), src)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}
