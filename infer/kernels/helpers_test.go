package kernels

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func rngFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 99)) }

// benchMatrixT is a small Q8_0 matrix for pool tests.
func benchMatrixT(t *testing.T) *Matrix {
	rows, cols := 40, 512
	m, err := NewMatrix(ggml.TypeQ8_0, rows, cols, randomWeights(rngFor(1), ggml.TypeQ8_0, rows, cols))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
