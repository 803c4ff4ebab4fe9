package main

import (
	"context"
	"fmt"
	"time"

	"github.com/muserhq/muser/serve/adminapi"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/tier"
	"github.com/spf13/pflag"
)

func newPackGCCommand() *command {
	var (
		maxBytes string
		dryRun   bool
		grace    time.Duration
		tf       tierFlags
		tgrace   time.Duration
	)
	cmd := &command{
		name:    "pack gc",
		summary: "evict least recently used packs to fit a byte budget; reclaim orphans",
		help: `Deletes quarantined packs, then, with --max-bytes, evicts unpinned packs
least recently used first until the store's chunks and manifests take at
most that many bytes. Chunks another pack still uses are kept. Then
deletes orphan files (chunks and manifests no pack references, files in
quarantine/, temporary files of interrupted writes) older than --grace;
temporary files older than the store's opening go whatever their age, as
only a crash can have left them. Prints each pack it
removes and what it frees. --dry-run prints the same without deleting.

--max-bytes takes a count with an optional unit: B, KB, MB, GB, TB
(powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024); a fraction of
a unit is rounded down to whole bytes, a count of bytes must be whole.
While a muser server owns the store, the server runs gc (docs/serve.md,
"Admin endpoint").

With --tier s3://BUCKET/PREFIX it collects the fleet tier instead, safely
while other nodes upload (docs/tier.md, "Consistency and gc"): it marks every chunk
a verified manifest names; with --max-bytes it evicts unpinned packs
('muser pack pin --tier'), least recently used first (the later of a
pack's upload and the last install of it by any node), by deleting their
manifests until the chunks the rest name fit (0 evicts every unpinned
pack, as for the local store); it then deletes chunks no manifest names
once they are older than --tier-grace (at least 12h, the upload rules'
bound), and manifests that do not verify after the same period. Objects
under chunks/ whose keys are not chunk IDs (a README, another tool's
temporary file) are not the tier's chunks: counted apart, never deleted.

` + tierHelp,
		home: true,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&maxBytes, "max-bytes", "", "byte budget for the store (default: no budget)")
			fs.BoolVar(&dryRun, "dry-run", false, "say what would be removed, remove nothing")
			fs.DurationVar(&grace, "grace", store.DefaultOrphanGrace, "keep orphan files younger than this")
			tf.AddFlags(fs, "collect")
			fs.DurationVar(&tgrace, "tier-grace", tier.DefaultGrace, "with --tier: keep unreferenced chunks younger than this (at least 12h)")
		},
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		req := adminapi.GCRequest{DryRun: dryRun, Grace: grace.String()}
		if grace < 0 {
			return usagef(cmd, "--grace must not be negative")
		}
		if maxBytes != "" {
			n, err := parseBytes(maxBytes)
			if err != nil {
				return usagef(cmd, "--max-bytes: %v", err)
			}
			req.MaxBytes = &n
		}
		if tf.url != "" {
			if tgrace < tier.MinGrace {
				return usagef(cmd, "--tier-grace %v: at least %v (docs/tier.md, rule G3)", tgrace, tier.MinGrace)
			}
			budget := int64(tier.NoBudget)
			if req.MaxBytes != nil {
				budget = *req.MaxBytes
			}
			return runTierGC(ctx, env, &tf, budget, tgrace, dryRun)
		}
		a, done, err := openAdmin(ctx, env, false)
		if err != nil {
			return err
		}
		defer done()
		rep, err := a.GC(ctx, req)
		if err != nil {
			return err
		}
		verb, freed := "removed", "freed"
		if dryRun {
			verb, freed = "would remove", "would free"
		}
		for _, p := range rep.Removed {
			why := "least recently used"
			if p.Quarantined {
				why = "quarantined"
			}
			fmt.Fprintf(env.stdout, "%s pack %s: %d tokens, %s, last use %s (%s)\n", verb, p.ID.Short(), p.Tokens,
				formatBytes(p.Bytes), formatTime(p.LastUse), why)
		}
		fmt.Fprintf(env.stdout, "%s %d packs: %s %s (%d chunks, %s of manifests); %d orphan files, %s\n",
			verb, len(rep.Removed), freed, formatBytes(rep.ChunkBytes+rep.ManifestBytes),
			rep.Chunks, formatBytes(rep.ManifestBytes), rep.Orphans, formatBytes(rep.OrphanBytes))
		fmt.Fprintf(env.stdout, "store: %s before, %s after", formatBytes(rep.Before), formatBytes(rep.After))
		if req.MaxBytes != nil {
			fmt.Fprintf(env.stdout, " (budget %s)", formatBytes(*req.MaxBytes))
		}
		fmt.Fprintln(env.stdout)
		if rep.OverBudget {
			fmt.Fprintf(env.stderr, "muser pack gc: pinned or in-use packs alone exceed the budget of %s\n", formatBytes(*req.MaxBytes))
		}
		return nil
	}
	return cmd
}
