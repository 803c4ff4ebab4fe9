package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

func newPackImportCommand() *command {
	var keyFile string
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
block size of the imported pack.`,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&keyFile, "key", "", "verify the seal with the secret in `FILE`")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one file, got %d arguments", len(args))
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
		s, err := openStore(env, false, false)
		if errors.Is(err, store.ErrNotFound) {
			// A new store takes the block size of the pack it starts with.
			var opts store.Options
			if fr, ferr := pack.NewFileReader(bufio.NewReader(f)); ferr == nil {
				opts.BlockTokens = fr.Manifest().BlockTokens
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			s, err = store.Open(env.home, opts)
		}
		if err != nil {
			return err
		}
		defer s.Close()
		res, err := s.Import(ctx, bufio.NewReaderSize(f, 1<<20), store.ImportOptions{Key: key, Source: "import:" + args[0]})
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
