package dashboard

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// BenchmarkSnapshot measures what one poll of the page costs the server:
// the state of a store of n packs (half of another model's identity, whose
// manifests are read for their model) and its JSON.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("packs=%d", n), func(b *testing.B) {
			st := storetest.Open(b, b.TempDir(), store.Options{NoSync: true})
			defer st.Close()
			id, other := packtest.Identity("served"), packtest.Identity("other")
			for i := range n {
				tokens := make([]int32, 2*st.BlockTokens())
				for j := range tokens {
					tokens[j] = int32(i*7 + j)
				}
				use := id
				if i%2 == 1 {
					use = other
				}
				storetest.Publish(b, st, use, []byte("tenant"), tokens, 256)
			}
			c := &Config{Store: st, Recorder: NewRecorder(), Identity: id, Model: "m"}
			b.ResetTimer()
			var size int
			for b.Loop() {
				out, err := json.Marshal(c.Snapshot())
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(size), "bytes/state")
		})
	}
}

// TestSnapshotPackModels checks the packs' model column: the served
// model's name for its identity's packs, the model of another identity's
// manifest for the rest.
func TestSnapshotPackModels(t *testing.T) {
	st := storetest.Open(t, t.TempDir(), store.Options{NoSync: true})
	defer st.Close()
	id, other := packtest.Identity("served"), packtest.Identity("other")
	for i := range 6 {
		tokens := make([]int32, 2*st.BlockTokens())
		for j := range tokens {
			tokens[j] = int32(i*7 + j)
		}
		use := id
		if i%2 == 1 {
			use = other
		}
		storetest.Publish(t, st, use, []byte("tenant"), tokens, 256)
	}
	c := &Config{Store: st, Recorder: NewRecorder(), Identity: id, Model: "m"}
	counts := map[string]int{}
	for _, p := range c.Snapshot().Store.Packs {
		counts[p.Model]++
	}
	want := map[string]int{"m": 3, "model " + other.Model.Short(): 3}
	if len(counts) != len(want) || counts["m"] != 3 || counts["model "+other.Model.Short()] != 3 {
		t.Errorf("got pack models %v, want %v", counts, want)
	}
}
