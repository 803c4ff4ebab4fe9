// Command blockdraft-vector writes test vectors of the block drafter
// (docs/blockdraft.md) for checking another implementation of its forward
// pass, such as the training recipe's, against infer/blockdraft: random
// hidden states and anchors, and the logits and draft tokens muser
// computes for them, as JSON.
//
//	go run ./scripts/blockdraft-vector -drafter trained.gguf -out vector.json
//	go run ./scripts/blockdraft-vector -random drafter.gguf -out vector.json
//
// With -random it first writes a random F32 drafter for the target (-target,
// the embedded default model when empty; blockdrafttest.Small's shape with
// the block size of -block) to that path and uses it.
//
// The JSON holds "drafter" (the path), "block_size", "target_hidden",
// "vocab", and "requests": each with "hidden" (target_hidden floats),
// "anchor", "logits" (for positions 1 … block_size-1, vocab floats each,
// float32 values written exactly) and "tokens" (the draft: each row's
// argmax, the lowest id on ties). docs/blockdraft.md ("Checking another
// implementation") says how closely another implementation should agree:
// within about 1e-4 relative on F32 weights, less closely on Q8_0, whose
// activations muser quantizes too.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/gguf"
)

type request struct {
	Hidden []float32   `json:"hidden"`
	Anchor int32       `json:"anchor"`
	Logits [][]float32 `json:"logits"`
	Tokens []int32     `json:"tokens"`
}

type vector struct {
	Drafter      string    `json:"drafter"`
	BlockSize    int       `json:"block_size"`
	TargetHidden int       `json:"target_hidden"`
	Vocab        int       `json:"vocab"`
	Requests     []request `json:"requests"`
}

func main() {
	drafter := flag.String("drafter", "", "the drafter GGUF to compute (or use -random)")
	random := flag.String("random", "", "write a random F32 drafter to this path and use it")
	target := flag.String("target", "", "the target GGUF the random drafter is for (default: the embedded default model)")
	block := flag.Int("block", 8, "the random drafter's block size")
	n := flag.Int("n", 4, "how many requests")
	seed := flag.Uint64("seed", 1, "seed of the random drafter and of the requests")
	out := flag.String("out", "", "the JSON file to write (default: standard output)")
	flag.Parse()
	if err := run(*drafter, *random, *target, *block, *n, *seed, *out); err != nil {
		fmt.Fprintln(os.Stderr, "blockdraft-vector:", err)
		os.Exit(1)
	}
}

func run(drafter, random, target string, block, n int, seed uint64, out string) error {
	switch {
	case (drafter == "") == (random == ""):
		return errors.New("give one of -drafter and -random")
	case n < 1:
		return errors.New("-n must be at least 1")
	}
	if random != "" {
		var f *gguf.File
		var err error
		if target == "" {
			f, err = defaultmodel.File()
		} else {
			f, err = gguf.Open(target)
		}
		if err != nil {
			return err
		}
		o := blockdrafttest.Small()
		o.Block, o.Seed = block, seed
		err = blockdrafttest.WriteFile(random, f, o)
		f.Close()
		if err != nil {
			return err
		}
		drafter = random
	}
	m, err := blockdraft.Open(drafter, 0)
	if err != nil {
		return err
	}
	defer m.Close()
	r := rand.New(rand.NewPCG(seed, 2))
	reqs := make([]blockdraft.Request, n)
	for i := range reqs {
		h := make([]float32, m.TargetHidden())
		for j := range h {
			h[j] = float32(r.NormFloat64())
		}
		reqs[i] = blockdraft.Request{Hidden: h, Anchor: int32(r.IntN(m.Vocab())), Max: m.BlockSize() - 1}
	}
	logits, err := m.Logits(context.Background(), reqs)
	if err != nil {
		return err
	}
	if err := m.Draft(context.Background(), reqs); err != nil {
		return err
	}
	v := vector{Drafter: drafter, BlockSize: m.BlockSize(), TargetHidden: m.TargetHidden(), Vocab: m.Vocab()}
	for i, q := range reqs {
		v.Requests = append(v.Requests, request{Hidden: q.Hidden, Anchor: q.Anchor, Logits: logits[i], Tokens: q.Tokens})
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if out == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(out, data, 0o644)
}
