package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/pack"
	"github.com/spf13/pflag"
)

func newPackExportCommand() *command {
	var out string
	cmd := &command{
		name:    "pack export",
		args:    "ID",
		summary: "write one pack to a sealed, self-describing file",
		help: `Writes the pack as one export file: header, manifest, seal (keyed BLAKE3
under the store's seal key, with this store's node name, a fresh seal
generation and a random nonce), each distinct chunk once, and a trailer
digest over the whole file. Every chunk is re-verified as it is read; a
pack that fails is quarantined and nothing is left at FILE. The file is
written beside FILE and renamed into place when complete. -o - writes to
standard output.

A store imports the file if its seal key is the same (or is given with
'muser pack import --key'); copy seal.key from this store's --home to
share it. Beside a running 'muser serve' of the same --home, the server
writes the file through its admin endpoint (HOME/serve.json). On a
terminal, stderr shows the bytes written, rate and time
left.`,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVarP(&out, "output", "o", "", "write to `FILE` (required; - for stdout)")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one pack ID, got %d arguments", len(args))
		}
		if out == "" {
			return usagef(cmd, "-o FILE is required")
		}
		api, closeAPI, err := openAdmin(ctx, env, false)
		if err != nil {
			return err
		}
		defer closeAPI()
		in, err := api.Inspect(ctx, args[0])
		if err != nil {
			return err
		}
		id := in.Pack.ID
		// The chunks' bytes, each distinct chunk once, are nearly the
		// whole file: the progress line's total.
		var total int64
		if in.Manifest != nil {
			seen := map[pack.Digest]bool{}
			for _, c := range in.Manifest.Chunks {
				if !seen[c.ID] {
					seen[c.ID] = true
					total += int64(c.Size)
				}
			}
		}
		meter := newMeter(env, false, "export "+id.Short(), progress.Bytes, total, 0)
		defer meter.Finish()
		if out == "-" {
			return api.Export(ctx, id.String(), progress.Writer{W: env.stdout, M: meter})
		}
		f, err := os.CreateTemp(filepath.Dir(out), ".muser-export-*")
		if err != nil {
			return err
		}
		tmp := f.Name()
		err = api.Export(ctx, id.String(), progress.Writer{W: f, M: meter})
		meter.Finish()
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, out)
		}
		if err != nil {
			_ = os.Remove(tmp)
			return err
		}
		fi, err := os.Stat(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "exported pack %s to %s (%s)\n", id.Short(), out, formatBytes(fi.Size()))
		return nil
	}
	return cmd
}
