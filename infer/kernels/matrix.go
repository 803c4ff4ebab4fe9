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

	// RowBytes is the size of one row in bytes. NewMatrix sets it; a Matrix
	// built by hand with RowBytes 0 has it computed on first use.
	RowBytes int
}

// NewMatrix returns a Matrix over data after checking that t has a kernel,
// that rows and cols are positive, that cols is a multiple of t's block
// size, and that data holds exactly rows rows.
func NewMatrix(t ggml.Type, rows, cols int, data []byte) (*Matrix, error) {
	m := &Matrix{Type: t, Rows: rows, Cols: cols, Data: data}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// check validates m and fills in RowBytes.
func (m *Matrix) check() error {
	fail := func(err error) error {
		return &MatrixError{Type: m.Type, Rows: m.Rows, Cols: m.Cols, Err: err}
	}
	if kernelFor(m.Type) == nil {
		return fail(ErrUnsupportedType)
	}
	if m.Rows <= 0 || m.Cols <= 0 {
		return fail(fmt.Errorf("%w: dimensions must be positive", ErrShape))
	}
	rb, err := m.Type.RowSize(m.Cols)
	if err != nil {
		return fail(fmt.Errorf("%w: %d columns: %v", ErrShape, m.Cols, err))
	}
	if m.Rows > len(m.Data)/rb+1 || rb*m.Rows != len(m.Data) {
		return fail(fmt.Errorf("%w: data is %d bytes, want %d rows × %d bytes", ErrShape, len(m.Data), m.Rows, rb))
	}
	m.RowBytes = rb
	return nil
}

// row returns the bytes of row r.
func (m *Matrix) row(r int) []byte {
	return m.Data[r*m.RowBytes : (r+1)*m.RowBytes]
}
