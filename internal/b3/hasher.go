package b3

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/zeebo/blake3"
)

// useTree says whether Hasher builds the tree itself with the 16-lane
// kernel (CPUs with AVX-512) or hands the bytes to zeebo/blake3. Tests set
// it to run the tree code with the portable kernel.
var useTree = cpuWide

// smallLen is the input length below which zeebo/blake3 is as fast: the
// 16-lane kernel needs 16 chunks to fill its lanes.
const smallLen = bufLen

// Hasher computes the BLAKE3 digest (plain hash mode, 32 bytes) of the
// bytes written to it. It implements hash.Hash. Create it with New.
type Hasher struct {
	z    *blake3.Hasher // the bytes go here where the tree is not built here
	tree tree
	n    int // bytes in buf
	buf  [bufLen]byte
}

// trees recycles the trees of Sum256.
var trees = sync.Pool{New: func() any { return new(tree) }}

// tree is a Hasher's state apart from its buffered bytes: the stack of
// subtree chaining values of the first chunks chunks, and the chaining
// values of the pending chunks hashed after them, which are pushed a
// whole batch at a time so that the parents of a batch are computed 16 at
// a time.
type tree struct {
	chunks  uint64
	sl      int
	pending int
	stack   [maxDepth][8]uint32
	cvs     [batchMax * Size]byte
}

// New returns a Hasher with nothing written.
func New() *Hasher {
	if !useTree {
		return &Hasher{z: blake3.New()}
	}
	return &Hasher{}
}

// Sum256 returns the BLAKE3 digest of b.
func Sum256(b []byte) [Size]byte {
	if !useTree || len(b) < smallLen {
		return blake3.Sum256(b)
	}
	t := trees.Get().(*tree)
	defer trees.Put(t)
	t.chunks, t.sl, t.pending = 0, 0, 0
	return t.finish(b)
}

// Size returns 32, the digest's length in bytes.
func (h *Hasher) Size() int { return Size }

// BlockSize returns 64, BLAKE3's block length.
func (h *Hasher) BlockSize() int { return blockLen }

// Reset returns h to the state New gave it.
func (h *Hasher) Reset() {
	if h.z != nil {
		h.z.Reset()
		return
	}
	h.tree.chunks, h.tree.sl, h.tree.pending = 0, 0, 0
	h.n = 0
}

// Write adds p to the hashed bytes. It never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	if h.z != nil {
		return h.z.Write(p)
	}
	total := len(p)
	if h.n > 0 {
		k := copy(h.buf[h.n:], p)
		h.n += k
		p = p[k:]
		if len(p) == 0 {
			return total, nil
		}
		// The buffer is full and more follows: none of it is the root.
		h.tree.fold(h.buf[:])
		h.n = 0
	}
	if len(p) > bufLen {
		// Hash straight from p every whole 16 chunks but the last run,
		// which the buffer keeps until it is known that more follows.
		l := (len(p) - 1) / bufLen * bufLen
		h.tree.fold(p[:l])
		p = p[l:]
	}
	h.n = copy(h.buf[:], p)
	return total, nil
}

// Sum appends the digest of the bytes written so far to b. It does not
// change h.
func (h *Hasher) Sum(b []byte) []byte {
	d := h.Digest()
	return append(b, d[:]...)
}

// Digest returns the digest of the bytes written so far. It does not
// change h.
func (h *Hasher) Digest() (d [Size]byte) {
	if h.z != nil {
		h.z.Sum(d[:0])
		return d
	}
	if h.tree.chunks == 0 && h.tree.pending == 0 && h.n < smallLen {
		return blake3.Sum256(h.buf[:h.n])
	}
	t := h.tree
	return t.finish(h.buf[:h.n])
}

// finish returns the digest of the bytes folded into t followed by rest,
// at least one byte; together they are at least smallLen bytes, so the
// last chunk is not the root. It changes t.
func (t *tree) finish(rest []byte) [Size]byte {
	if len(rest)%chunkLen == 0 {
		// The last chunk is whole: hash it with the others, then join
		// the stack from its top, whose two entries are the last run's
		// halves or a run and the last chunk.
		t.fold(rest)
		t.reduce()
		o := parentOutput(&t.stack[t.sl-2], &t.stack[t.sl-1])
		for i := t.sl - 3; i >= 0; i-- {
			cv := o.chain()
			o = parentOutput(&t.stack[i], &cv)
		}
		return o.root()
	}
	full := len(rest) / chunkLen
	t.fold(rest[:full*chunkLen])
	t.reduce()
	t.merge(t.chunks)
	o := chunkOutput(rest[full*chunkLen:], t.chunks)
	for i := t.sl - 1; i >= 0; i-- {
		cv := o.chain()
		o = parentOutput(&t.stack[i], &cv)
	}
	return o.root()
}

// merge combines the stack's top pairs until it holds one subtree per
// set bit of chunks, the form it has when chunks chunks are complete.
func (t *tree) merge(chunks uint64) {
	for t.sl > bits.OnesCount64(chunks) {
		o := parentOutput(&t.stack[t.sl-2], &t.stack[t.sl-1])
		t.stack[t.sl-2] = o.chain()
		t.sl--
	}
}

// push adds the chaining value of the subtree whose first chunk is chunk
// number at.
func (t *tree) push(cv [8]uint32, at uint64) {
	t.merge(at)
	t.stack[t.sl] = cv
	t.sl++
}

// fold hashes data, whole chunks none of which is the root (more input
// follows them), into the pending chaining values, pushing each full
// batch.
func (t *tree) fold(data []byte) {
	for len(data) > 0 {
		nc := min(len(data)/chunkLen, batchMax-t.pending)
		chunkCVs(data[:nc*chunkLen], t.chunks+uint64(t.pending), t.cvs[t.pending*Size:])
		t.pending += nc
		data = data[nc*chunkLen:]
		if t.pending == batchMax {
			t.reduce()
		}
	}
}

// reduce pushes the pending chaining values on the stack as complete
// subtrees: each aligned power-of-two run is reduced to its two halves
// by parent compressions 16 at a time.
func (t *tree) reduce() {
	for pos := 0; pos < t.pending; {
		// The largest power-of-two run that fits and starts at a
		// multiple of its size: a complete left subtree.
		s := 1 << (bits.Len(uint(t.pending-pos)) - 1)
		for t.chunks%uint64(s) != 0 {
			s /= 2
		}
		run := t.cvs[pos*Size : (pos+s)*Size]
		if s == 1 {
			t.push(cvBytes(run), t.chunks)
		} else {
			for n := s; n > 2; n /= 2 {
				parentCVs(run[:n*Size], run[:n/2*Size])
			}
			t.push(cvBytes(run), t.chunks)
			t.push(cvBytes(run[Size:]), t.chunks+uint64(s/2))
		}
		t.chunks += uint64(s)
		pos += s
	}
	t.pending = 0
}

// chunkCVs writes the chaining values of the whole chunks of data, the
// first of which is chunk number counter, to out (32 bytes each).
func chunkCVs(data []byte, counter uint64, out []byte) {
	lanesOf(data, chunkLen, counter, 1, 0, flagStart, flagEnd, out)
}

// parentCVs writes the parent chaining values of the pairs of chaining
// values in cvs to out, which may be cvs's first half.
func parentCVs(cvs, out []byte) {
	lanesOf(cvs, 2*Size, 0, 0, flagPar, 0, 0, out)
}

// lanesOf runs the 16-lane kernel over src cut into inputs of stride
// bytes (whole blocks), input j with counter counter+j*step, and writes
// input j's chaining value at out[32*j:]. Writing out after each group
// of 16 lets out overlap the start of src.
func lanesOf(src []byte, stride int, counter, step uint64, flags, start, end uint32, out []byte) {
	n := len(src) / stride
	var in [lanes]*byte
	var ctr [2 * lanes]uint32
	var res [lanes][Size]byte
	for g := 0; g < n; g += lanes {
		m := min(lanes, n-g)
		for i := 0; i < lanes; i++ {
			j := g + min(i, m-1) // spare lanes repeat the last input
			in[i] = &src[j*stride]
			c := counter + uint64(j)*step
			ctr[i], ctr[lanes+i] = uint32(c), uint32(c>>32)
		}
		hashMany(&in, stride/blockLen, &iv, &ctr, flags, start, end, &res)
		for i := 0; i < m; i++ {
			copy(out[(g+i)*Size:], res[i][:])
		}
	}
}

// chunkOutput returns the last compression of the chunk b (0 to 1,024
// bytes), chunk number counter: every block but its last is compressed
// here.
func chunkOutput(b []byte, counter uint64) output {
	nb := max(1, (len(b)+blockLen-1)/blockLen)
	o := output{cv: iv, counter: counter, flags: flagEnd}
	if nb > 1 {
		var in [lanes]*byte
		var ctr [2 * lanes]uint32
		var res [lanes][Size]byte
		for i := range in {
			in[i] = &b[0]
		}
		ctr[0], ctr[lanes] = uint32(counter), uint32(counter>>32)
		hashMany(&in, nb-1, &iv, &ctr, 0, flagStart, 0, &res)
		for i := range o.cv {
			o.cv[i] = binary.LittleEndian.Uint32(res[0][4*i:])
		}
	} else {
		o.flags |= flagStart
	}
	last := b[(nb-1)*blockLen:]
	o.m = words(last)
	o.blen = uint32(len(last))
	return o
}

// hashManyGo is the portable definition of the 16-lane kernel: lane i
// compresses nblocks blocks from in[i] starting from the chaining value
// key, with counter ctr[i] | ctr[16+i]<<32, flags on every block, start on
// the first and end on the last, and writes its chaining value to out[i].
func hashManyGo(in *[lanes]*byte, nblocks int, key *[8]uint32, ctr *[2 * lanes]uint32, flags, start, end uint32, out *[lanes][Size]byte) {
	for i := 0; i < lanes; i++ {
		cv := *key
		c := uint64(ctr[i]) | uint64(ctr[lanes+i])<<32
		p := unsafe.Slice(in[i], nblocks*blockLen)
		for b := 0; b < nblocks; b++ {
			f := flags
			if b == 0 {
				f |= start
			}
			if b == nblocks-1 {
				f |= end
			}
			m := words(p[b*blockLen:])
			v := compress(&cv, &m, c, blockLen, f)
			copy(cv[:], v[:8])
		}
		for w := range cv {
			binary.LittleEndian.PutUint32(out[i][4*w:], cv[w])
		}
	}
}
