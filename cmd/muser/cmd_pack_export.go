package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/spf13/pflag"
)

func newPackExportCommand() *command {
	var (
		out   string
		force bool
	)
	cmd := &command{
		name:    "pack export",
		args:    "ID",
		summary: "write one pack to a sealed, self-describing file",
		help: `Writes the pack as one export file: header, manifest, seal (keyed BLAKE3
under the store's seal key, with this store's node name, a fresh seal
generation and a random nonce), each distinct chunk once, and a trailer
digest over the whole file. Every chunk is re-verified as it is read; a
pack that fails is quarantined and nothing is left at FILE. The file is
written beside FILE and moved into place when complete; an existing FILE
is replaced only with --force (without it, exit status 1 and FILE is left
as it was). -o - writes to standard output.

A store imports the file if its seal key is the same (or is given with
'muser pack import --key'); copy seal.key from this store's --home to
share it. Beside a running 'muser serve' of the same --home, the server
writes the file through its admin endpoint (HOME/serve.json). On a
terminal, stderr shows the bytes written, rate and time
left.`,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVarP(&out, "output", "o", "", "write to `FILE` (required; - for stdout)")
			fs.BoolVar(&force, "force", false, "replace FILE if it exists")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one pack ID, got %d arguments", len(args))
		}
		if err := checkPackRefs(cmd, args); err != nil {
			return err
		}
		if out == "" {
			return usagef(cmd, "-o FILE is required")
		}
		if out != "-" && !force {
			if _, err := os.Lstat(out); err == nil {
				return fmt.Errorf("%s exists; --force replaces it", out)
			}
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
		if err := exportFile(ctx, api, id, out, force, meter); err != nil {
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

// exportFile writes pack id's export file to a temporary file beside out
// and moves it to out once whole: a link, which refuses a name that
// exists (taken meanwhile too), or with force a rename over it. On any
// failure nothing is left behind.
func exportFile(ctx context.Context, api adminapi.API, id pack.Digest, out string, force bool, meter *progress.Meter) error {
	f, err := os.CreateTemp(filepath.Dir(out), ".muser-export-*")
	if err != nil {
		return &outputError{path: out, err: err}
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the link or rename, a name no longer there
	err = api.Export(ctx, id.String(), progress.Writer{W: f, M: meter})
	meter.Finish()
	if err != nil {
		f.Close()
		return err // the export's own error: a refusal, a missing pack
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if force {
			err = os.Rename(tmp, out)
		} else if err = os.Link(tmp, out); errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists; --force replaces it", out)
		} else if err != nil {
			// A file system without hard links: check, then rename.
			if _, serr := os.Lstat(out); errors.Is(serr, fs.ErrNotExist) {
				err = os.Rename(tmp, out)
			}
		}
	}
	if err != nil {
		return &outputError{path: out, err: err}
	}
	return nil
}
