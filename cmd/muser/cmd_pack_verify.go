package main

import (
	"context"
	"fmt"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

func newPackVerifyCommand() *command {
	var (
		asJSON bool
		subset string
		tf     tierFlags
	)
	cmd := &command{
		name:    "pack verify",
		args:    "[ID...]",
		summary: "check packs: manifests, Merkle roots, ledger and every chunk's digest",
		help: `Checks the named packs, or the whole store: each pack's manifest hashes to
its ID and decodes, its Merkle root checks, its ledger record and block
chain agree with it, and every chunk file is present with the right size
and BLAKE3 digest. A whole-store check also compares chunk reference
counts and the radix index with the ledger. Every finding is printed on
its own line naming the pack and the fault, then "N errors found" (exit
status 1) or "OK" (exit 0). Packs with findings are quarantined (never
matched or restored again; 'muser pack rm' or 'muser pack gc' deletes
them) and each gets a receipt.

--read-data-subset n/t reads only chunks in subset n of t (see the
format spec); running 1/t to t/t covers every chunk. Progress goes to
stderr when it is a terminal. While a muser server owns the store, the
server runs the check (docs/serve.md, "Admin endpoint").

With --tier s3://BUCKET/PREFIX it checks the fleet tier instead, reading
every object once and changing nothing: each manifest object's layout,
name, seal (under the cluster's key) and Merkle root, and each chunk a
manifest names (present, its size, its BLAKE3). Each finding names the
object, the pack and the fault (missing, truncated, digest, bad seal).

` + tierHelp,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&subset, "read-data-subset", "", "read only the chunks of subset `n/t`")
			fs.BoolVar(&asJSON, "json", false, "print JSON")
			tf.AddFlags(fs, "check")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if tf.url != "" {
			if len(args) > 0 || subset != "" {
				return usagef(cmd, "--tier checks the whole tier: no IDs or --read-data-subset")
			}
			return runTierVerify(ctx, env, &tf, asJSON)
		}
		if err := checkPackRefs(cmd, args); err != nil {
			return err
		}
		req := adminapi.VerifyRequest{Packs: args, ReadDataSubset: subset}
		if subset != "" {
			if _, err := store.ParseSubset(subset); err != nil {
				return usagef(cmd, "--read-data-subset: %v", err)
			}
		}
		a, done, err := openAdmin(ctx, env, false)
		if err != nil {
			return err
		}
		defer done()
		var onChunk func(done, total int)
		meter := newMeter(env, asJSON, "verify", progress.Chunks, 0, 0)
		if !asJSON && progress.IsTerminal(env.stderr) {
			onChunk = func(done, total int) {
				meter.SetTotal(int64(total))
				meter.Set(int64(done))
			}
		}
		rep, err := a.Verify(ctx, req, onChunk)
		meter.Finish()
		if err != nil {
			return err
		}
		n := rep.Errors
		if asJSON {
			if err := writeJSON(env.stdout, rep); err != nil {
				return err
			}
		} else {
			for _, f := range rep.Findings {
				fmt.Fprintln(env.stdout, f.Error)
			}
		}
		for _, q := range rep.Quarantined {
			fmt.Fprintf(env.stderr, "quarantined pack %s\n", q.Short())
		}
		if rep.Orphans > 0 && !asJSON {
			fmt.Fprintf(env.stderr, "%d unreferenced chunk files (%s); 'muser pack gc' reclaims them\n", rep.Orphans, formatBytes(rep.OrphanBytes))
		}
		if n > 0 {
			if !asJSON {
				fmt.Fprintf(env.stdout, "%d errors found\n", n)
			}
			return &reportedError{err: fmt.Errorf("%d errors found: %w", n, pack.ErrCorrupt)}
		}
		if !asJSON {
			fmt.Fprintln(env.stdout, "OK")
		}
		return nil
	}
	return cmd
}
