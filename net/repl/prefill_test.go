package repl

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/muserhq/muser/net/repl/repltest"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store/storetest"
)

func producerOpt(p **repltest.SyntheticPrefiller, answer func(pack.Identity, []int32) (pack.Identity, []int32)) nodeOpt {
	return func(c *Config) {
		sp := &repltest.SyntheticPrefiller{Store: c.Store, Engine: testID, ChunkSize: testChunk, Answer: answer}
		*p = sp
		c.Prefiller = sp
	}
}

// TestRemotePrefill: the consumer's installed KV equals what it would
// have computed locally, block for block; only the blocks it lacked move;
// the producer reuses its own cache.
func TestRemotePrefill(t *testing.T) {
	var prod *repltest.SyntheticPrefiller
	nodes := newCluster(t, []string{"producer", "consumer"}, map[string][]nodeOpt{
		"producer": {producerOpt(&prod, nil)},
	})
	consumer := nodes[1]
	ctx := ctxT(t)
	salt := []byte("tenant")
	prompt := packtest.Tokens(11, 30*testBlock+7, 512) // 30 blocks and a tail

	// The consumer holds the first 10 blocks already.
	storePublish(t, consumer.store, prompt[:10*testBlock])
	res, err := consumer.repl.Prefill(ctx, "producer", testID, salt, prompt[:20*testBlock+3], 10*testBlock)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tokens != 20*testBlock || res.Moved != 10 || !res.New {
		t.Fatalf("prefill result %+v, want 20 blocks, 10 moved, new", res)
	}
	if got := prod.BlocksComputed(); got != 20 {
		t.Fatalf("producer computed %d blocks, want 20", got)
	}
	// The consumer now restores 20 blocks, byte-identical to local
	// computation.
	n, blocks, err := storetest.Restore(t, consumer.store, testID, salt, prompt)
	if err != nil || n != 20*testBlock {
		t.Fatalf("consumer restore: %d tokens, %v; want %d", n, err, 20*testBlock)
	}
	local := storetest.KV(testID, salt, prompt[:20*testBlock], testBlock, testChunk)
	for i, b := range blocks {
		want, _ := local(i)
		if !slices.Equal(b, want) {
			t.Fatalf("block %d differs from a local prefill", i)
		}
	}
	// A longer prompt: the producer computes only the 10 new blocks; 10
	// move.
	res, err = consumer.repl.Prefill(ctx, "producer", testID, salt, prompt, 20*testBlock)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tokens != 30*testBlock || res.Moved != 10 {
		t.Fatalf("second prefill %+v, want 30 blocks with 10 moved", res)
	}
	if got := prod.BlocksComputed(); got != 30 {
		t.Fatalf("producer computed %d blocks in all, want 30 (its cache reused)", got)
	}
}

func TestRemotePrefillRefusals(t *testing.T) {
	var prodBad, prodTok *repltest.SyntheticPrefiller
	wrongQuant := func(id pack.Identity, toks []int32) (pack.Identity, []int32) {
		id.Quant = "Q4_0"
		return id, toks
	}
	otherTokens := func(id pack.Identity, toks []int32) (pack.Identity, []int32) {
		t := slices.Clone(toks)
		t[len(t)-1]++
		return id, t
	}
	nodes := newCluster(t, []string{"consumer", "plain", "liar", "mixer"}, map[string][]nodeOpt{
		"liar":  {producerOpt(&prodBad, wrongQuant)},
		"mixer": {producerOpt(&prodTok, otherTokens)},
	})
	consumer := nodes[0]
	salt := []byte("tenant")
	prompt := packtest.Tokens(12, 4*testBlock, 512)
	other := testID
	other.Engine = "muser-other/9"

	tests := []struct {
		desc   string
		peer   string
		id     pack.Identity
		code   wire.Code
		remote bool
		reason pack.Reason // receipt the consumer records, if any
	}{
		{"not a producer", "plain", testID, wire.CodeUnavailable, true, ""},
		{"producer's engine differs", "liar", other, wire.CodePrefillFailed, true, ""},
		{"answer with another identity", "liar", testID, wire.CodeIdentityMismatch, false, pack.ReasonIdentityMismatch},
		{"answer with other tokens", "mixer", testID, wire.CodeMalformed, false, pack.ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var before int
			if tt.reason != "" {
				before = len(receiptsFor(t, consumer.store, tt.reason))
			}
			_, err := consumer.repl.Prefill(ctxT(t), tt.peer, tt.id, salt, prompt, 0)
			we := wantWire(t, err, tt.code, tt.remote)
			t.Logf("%v", we)
			if tt.reason == "" {
				return
			}
			rs := receiptsFor(t, consumer.store, tt.reason)
			if len(rs) != before+1 || rs[len(rs)-1].Source != "peer:"+tt.peer || rs[len(rs)-1].ID != we.Receipt {
				t.Fatalf("receipts %+v, want one more from peer:%s with ID %q", rs, tt.peer, we.Receipt)
			}
			if tt.reason == pack.ReasonIdentityMismatch {
				f := rs[len(rs)-1].Fields
				if len(f) != 1 || f[0].Field != "quant" {
					t.Fatalf("fields %+v, want exactly quant", f)
				}
			}
		})
	}
	if packCount(t, consumer.store) != 0 {
		t.Fatal("a refused prefill answer was published")
	}
	_, err := consumer.repl.Prefill(context.Background(), "plain", testID, salt, prompt, 5*testBlock)
	if err == nil || errors.Is(err, pack.ErrRefused) {
		t.Fatalf("have beyond the prompt: %v, want a local argument error", err)
	}
}
