package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

func newPackImportCommand() *command {
	var keyFile, expectModel, kvName string
	cmd := &command{
		name:    "pack import",
		args:    "FILE",
		summary: "verify an export file and add its pack to the store",
		help: `Reads an export file and re-verifies everything before the pack becomes
visible: the file's layout and trailer digest, the seal (under this
store's seal key, or the key in --key), the replay ledger (a seal's nonce
is accepted once; its generation must exceed the last accepted from its
producer), the format version, the block size, each chunk's BLAKE3 and
the Merkle root. Anything that does not verify is refused: exit status 4,
and 'muser receipts ls' shows the receipt. Chunks read before a refusal
are not visible; gc reclaims them. The store is created if absent, with the
block size of the imported pack. While a muser server owns the store,
the file is sent to it and it imports (docs/serve.md, "Admin endpoint").
On a terminal, stderr shows the bytes read, rate and time left.

With --expect-model FILE the pack must also have been made by that GGUF
model: its identity must equal, field by field, the one muser serve and
muser run compute for KV made with FILE (--kv f16 or f32, the store's
block size; model inspect prints the same fields; the model field digests
every byte of FILE's tensors, so this reads the whole file). A pack made by another
model, tokenizer, template, quantization, KV layout or engine version is
refused as identity-mismatch, naming each differing field (exit status 4);
a FILE whose identity cannot be computed (an architecture the engine does
not support) is an error before anything is read (exit status 1; 3 when
FILE does not exist), and creates no store.`,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&keyFile, "key", "", "verify the seal with the secret in `FILE`")
			fs.StringVar(&expectModel, "expect-model", "", "refuse a pack not made by the GGUF model `FILE`")
			fs.StringVar(&kvName, "kv", "f16", "KV element type --expect-model's identity is computed for: f16 or f32")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one file, got %d arguments", len(args))
		}
		kv, err := kvcache.ParseDType(kvName)
		if err != nil {
			return usagef(cmd, "--kv: %v", err)
		}
		var key []byte
		if keyFile != "" {
			b, err := os.ReadFile(keyFile)
			if err != nil {
				return fmt.Errorf("--key: %w", err)
			}
			key = b
		}
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		a, done, err := openAdmin(ctx, env, false)
		var newStore *store.Options
		if errors.Is(err, store.ErrNotFound) {
			// A new store takes the block size of the pack it starts with;
			// it is created only once every flag has been checked.
			newStore = &store.Options{BlockTokens: store.DefaultBlockTokens}
			if fr, ferr := pack.NewFileReader(bufio.NewReader(f)); ferr == nil {
				newStore.BlockTokens = fr.Manifest().BlockTokens
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if a != nil {
			defer done()
		}
		req := adminapi.ImportRequest{Key: key, Source: "import:" + args[0]}
		if expectModel != "" {
			var block int
			if a != nil {
				st, err := a.Stats(ctx)
				if err != nil {
					return err
				}
				block = st.BlockTokens
			} else {
				block = newStore.BlockTokens
			}
			id, err := expectedIdentity(expectModel, kv, block)
			if err != nil {
				return err
			}
			req.Expect = &id
		}
		if newStore != nil {
			s, err := store.Open(env.home, *newStore)
			if err != nil {
				return err
			}
			defer s.Close()
			a = adminapi.Local{Store: s}
		}
		var size int64
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		meter := newMeter(env, false, "import", progress.Bytes, size, 0)
		res, err := a.Import(ctx, progress.Reader{R: bufio.NewReaderSize(f, 1<<20), M: meter}, req)
		meter.Finish()
		if err != nil {
			return err
		}
		if res.New {
			fmt.Fprintf(env.stdout, "imported pack %s (%d chunks written, %s)\n", res.Pack, res.ChunksWritten, formatBytes(res.BytesWritten))
		} else {
			fmt.Fprintf(env.stdout, "pack %s is already in the store\n", res.Pack)
		}
		return nil
	}
	return cmd
}

// expectedIdentity is the identity serve and run give KV made with the
// GGUF model at path, with KV type kv in blocks of block tokens: what
// pack import --expect-model holds a pack to.
func expectedIdentity(path string, kv kvcache.DType, block int) (pack.Identity, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return pack.Identity{}, fmt.Errorf("--expect-model: %w", err)
	}
	defer f.Close()
	id, err := engine.Identity(f, engine.IdentityOptions{KV: kv, BlockTokens: block})
	var ie *engine.IdentityError
	if errors.As(err, &ie) {
		fe := ie.Fields[0]
		return pack.Identity{}, fmt.Errorf("--expect-model %s: the %s field cannot be computed: %v", path, fe.Field, fe.Err)
	}
	if err != nil {
		return pack.Identity{}, fmt.Errorf("--expect-model: %w", err)
	}
	return id, nil
}
