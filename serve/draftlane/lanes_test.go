package draftlane

import (
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/serve/sched"
)

// defaultModelPath is the default model's file in the repository.
const defaultModelPath = "../../infer/defaultmodel/model.gguf"

// TestDraftModelMemory: the draft model's file is held as its target's
// is, resident or mapped (--mmap), whatever the caller's Engine says.
func TestDraftModelMemory(t *testing.T) {
	_, tok := target(t)
	for _, mapped := range []bool{false, true} {
		dev := cpu.New(cpu.Options{Threads: 1})
		tm, err := engine.Open(defaultModelPath, engine.Options{Device: dev, Mapped: mapped})
		if err != nil {
			t.Fatal(err)
		}
		d, err := Open(Lanes{Model: defaultModelPath, Engine: engine.Options{Device: dev, Mapped: !mapped}}, tm, tok)
		if err != nil {
			tm.Close()
			t.Fatal(err)
		}
		md, ok := d.(*sched.ModelDrafter)
		if !ok {
			t.Fatalf("the model lane is a %T", d)
		}
		if got, want := md.Model().File().Memory(), tm.File().Memory(); got != want || (want == gguf.Mapped) != mapped {
			t.Errorf("target %v: draft model %v", want, got)
		}
		d.Close()
		tm.Close()
	}
}
