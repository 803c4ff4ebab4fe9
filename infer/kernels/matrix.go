package kernels

import (
	"fmt"

	"github.com/muserhq/muser/infer/ggml"
)

// Matrix is a weight matrix in ggml layout: Rows rows of Cols elements; row
// r is Data[r*RowBytes : (r+1)*RowBytes] in Type's block format, where
// RowBytes = Type.RowSize(Cols). Data is usually a slice of a memory-mapped
// GGUF file: kernels read the blocks where they lie and never copy or
// convert the weights.
type Matrix struct {
	Type       ggml.Type
	Rows, Cols int
	Data       []byte

	// RowBytes is the size of one row in bytes. NewMatrix sets it; MatMul
	// checks the whole Matrix on every call (a hand-built one may leave
	// RowBytes 0) and never writes to it.
	RowBytes int

	// bf16 caches a BF16 matrix's exponent range (NewMatrix sets it; a
	// hand-built Matrix has none and does without it). The range assumes
	// Data does not change after the first MatMul.
	bf16 *bf16Cache
}

// NewMatrix returns a Matrix over data after checking that t has a kernel,
// that rows and cols are positive, that cols is a multiple of t's block
// size, and that data holds exactly rows rows.
func NewMatrix(t ggml.Type, rows, cols int, data []byte) (*Matrix, error) {
	m := &Matrix{Type: t, Rows: rows, Cols: cols, Data: data}
	rb, err := m.check()
	if err != nil {
		return nil, err
	}
	m.RowBytes = rb
	if t == ggml.TypeBF16 {
		m.bf16 = new(bf16Cache)
	}
	return m, nil
}

// check validates m and returns its row size. RowBytes, if set, must be
// right.
func (m *Matrix) check() (int, error) {
	fail := func(err error) error {
		return &MatrixError{Type: m.Type, Rows: m.Rows, Cols: m.Cols, Err: err}
	}
	if kernelFor(m.Type) == nil {
		return 0, fail(ErrUnsupportedType)
	}
	if m.Rows <= 0 || m.Cols <= 0 {
		return 0, fail(fmt.Errorf("%w: dimensions must be positive", ErrShape))
	}
	rb, err := m.Type.RowSize(m.Cols)
	if err != nil {
		return 0, fail(fmt.Errorf("%w: %d columns: %v", ErrShape, m.Cols, err))
	}
	if m.Rows > len(m.Data)/rb+1 || rb*m.Rows != len(m.Data) {
		return 0, fail(fmt.Errorf("%w: data is %d bytes, want %d rows × %d bytes", ErrShape, len(m.Data), m.Rows, rb))
	}
	if m.RowBytes != 0 && m.RowBytes != rb {
		return 0, fail(fmt.Errorf("%w: RowBytes is %d, want %d", ErrShape, m.RowBytes, rb))
	}
	return rb, nil
}

// row returns the bytes of row r.
func (m *Matrix) row(r int) []byte {
	return m.Data[r*m.RowBytes : (r+1)*m.RowBytes]
}
