package blockdraft_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/drafts.golden")

// TestGoldenDrafts keeps the drafts of blockdrafttest's drafters for the
// shared test model fixed: the same file and requests must give the same
// tokens on every machine and instruction set (the kernels' results do
// not depend on either), and a change to the forward pass or to the
// helper's weights shows here. go test -run TestGoldenDrafts -update
// rewrites testdata/drafts.golden.
//
// Every kernel variant this CPU runs (kernels.SetISA) must give the same
// drafts.
func TestGoldenDrafts(t *testing.T) {
	target := openTarget(t)
	drafts := func() string {
		var b strings.Builder
		for _, typ := range []ggml.Type{ggml.TypeF32, ggml.TypeQ8_0} {
			o := blockdrafttest.Options{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Block: 8, Seed: 12, Type: typ}
			m := openDrafter(t, target, o, 2)
			reqs := randomRequests(m, 6, 99)
			if err := m.Draft(context.Background(), reqs); err != nil {
				t.Fatal(err)
			}
			for i, r := range reqs {
				fmt.Fprintf(&b, "%v request %d anchor %d: %v\n", typ, i, r.Anchor, r.Tokens)
			}
		}
		return b.String()
	}
	path := filepath.Join("testdata", "drafts.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(drafts()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestGoldenDrafts -update writes it)", err)
	}
	defer kernels.SetISA(kernels.CurrentISA())
	for v := kernels.ISAGeneric; v <= kernels.BestISA(); v++ {
		kernels.SetISA(v)
		if got := drafts(); got != string(want) {
			t.Errorf("kernels %v: drafts differ from %s:\ngot:\n%swant:\n%s", v, path, got, want)
		}
	}
}
