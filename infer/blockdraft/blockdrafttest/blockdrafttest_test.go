package blockdrafttest_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

const targetPath = "../../../../shared/models/stories260K.gguf"

func TestWriteFor(t *testing.T) {
	cases := []struct {
		name string
		o    blockdrafttest.Options
		want blockdraft.Config // the fields compared
	}{
		{"defaults", blockdrafttest.Options{}, blockdraft.Config{BlockSize: 4, Hidden: 64, Layers: 1, FFN: 128, Heads: 4, KVHeads: 2, TargetHidden: 64, Vocab: 512}},
		{"q8_0", blockdrafttest.Options{Hidden: 96, Layers: 2, Heads: 3, KVHeads: 1, FFN: 64, Block: 6, Type: ggml.TypeQ8_0}, blockdraft.Config{BlockSize: 6, Hidden: 96, Layers: 2, FFN: 64, Heads: 3, KVHeads: 1, TargetHidden: 64, Vocab: 512}},
		{"other target hidden", blockdrafttest.Options{TargetHidden: 160}, blockdraft.Config{BlockSize: 4, Hidden: 64, Layers: 1, FFN: 128, Heads: 4, KVHeads: 2, TargetHidden: 160, Vocab: 512}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.gguf")
			if err := blockdrafttest.WriteFor(path, targetPath, tc.o); err != nil {
				t.Fatal(err)
			}
			m, err := blockdraft.Open(path, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c := m.Config()
			got := blockdraft.Config{BlockSize: c.BlockSize, Hidden: c.Hidden, Layers: c.Layers, FFN: c.FFN, Heads: c.Heads,
				KVHeads: c.KVHeads, TargetHidden: c.TargetHidden, Vocab: c.Vocab}
			if got != tc.want {
				t.Errorf("config %+v, want %+v", got, tc.want)
			}
			typ := tc.o.Type
			for _, ti := range m.File().Tensors {
				want := typ
				if len(ti.Shape) == 1 {
					want = ggml.TypeF32
				}
				if ti.Type != want {
					t.Errorf("tensor %s: type %v, want %v", ti.Name, ti.Type, want)
				}
			}
		})
	}
}

func TestBytesDeterministic(t *testing.T) {
	target, err := gguf.Open(targetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	a, err := blockdrafttest.Bytes(target, blockdrafttest.Options{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	b, err := blockdrafttest.Bytes(target, blockdrafttest.Options{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	c, err := blockdrafttest.Bytes(target, blockdrafttest.Options{Seed: 6})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("seed 5 twice: the files differ, want the same bytes")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 5 and 6: the same bytes, want different weights")
	}
}

func TestBuildRefuses(t *testing.T) {
	target, err := gguf.Open(targetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if _, err := blockdrafttest.Build(target, blockdrafttest.Options{Heads: 3}); err == nil {
		t.Error("3 heads of hidden 64: got no error")
	}
	if _, err := blockdrafttest.Build(target, blockdrafttest.Options{Heads: 4, KVHeads: 3}); err == nil {
		t.Error("3 KV heads of 4 heads: got no error")
	}
	bare := gguf.NewBuilder()
	bare.Set("general.architecture", "llama")
	bare.Set("llama.embedding_length", uint32(64))
	data, err := bare.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blockdrafttest.Build(f, blockdrafttest.Options{}); err == nil {
		t.Error("a target without tokenizer.ggml.tokens: got no error")
	}
}
