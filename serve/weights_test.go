package serve

import (
	"testing"

	"github.com/muserhq/muser/infer/gguf"
)

// TestMapModel: the CPU engine's model is read into resident memory
// unless Options.MapModel (--mmap) asks for the mapping.
func TestMapModel(t *testing.T) {
	for _, c := range []struct {
		mapModel bool
		want     gguf.Memory
	}{{false, gguf.Resident}, {true, gguf.Mapped}} {
		ts := startServer(t, func(o *Options) { o.MapModel = c.mapModel })
		if got := ts.s.model.eng.File().Memory(); got != c.want {
			t.Errorf("MapModel %v: the model is %v, want %v", c.mapModel, got, c.want)
		}
	}
}
