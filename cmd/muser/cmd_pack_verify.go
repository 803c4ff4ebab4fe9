package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

type verifyJSON struct {
	Packs       int           `json:"packs"`
	ChunksRead  int           `json:"chunks_read"`
	BytesRead   int64         `json:"bytes_read"`
	Findings    []findingJSON `json:"findings"`
	Errors      int           `json:"errors"`
	Quarantined []pack.Digest `json:"quarantined"`
	Orphans     int           `json:"orphans"`
	OrphanBytes int64         `json:"orphan_bytes"`
}

type findingJSON struct {
	Pack   *pack.Digest `json:"pack,omitempty"`
	Reason string       `json:"reason"`
	Error  string       `json:"error"`
}

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
stderr when it is a terminal. The store must not be in use.

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
		opts := store.VerifyOptions{Quarantine: true}
		if subset != "" {
			sub, err := store.ParseSubset(subset)
			if err != nil {
				return usagef(cmd, "--read-data-subset: %v", err)
			}
			opts.Subset = sub
		}
		s, err := openStore(env, false, false)
		if err != nil {
			return err
		}
		defer s.Close()
		if opts.Packs, err = resolvePacks(s, args); err != nil {
			return err
		}
		progress := !asJSON && isTerminal(env.stderr)
		if progress {
			opts.Progress = func(done, total int) {
				if done == total || done%64 == 0 {
					fmt.Fprintf(env.stderr, "\rverify: %d/%d chunks read", done, total)
				}
			}
		}
		rep, err := s.Verify(ctx, opts)
		if progress {
			fmt.Fprintln(env.stderr)
		}
		if err != nil {
			return err
		}
		n := len(rep.Findings)
		if asJSON {
			out := verifyJSON{Packs: rep.Packs, ChunksRead: rep.ChunksRead, BytesRead: rep.BytesRead,
				Findings: []findingJSON{}, Errors: n, Quarantined: rep.Quarantined,
				Orphans: rep.Orphans, OrphanBytes: rep.OrphanBytes}
			if out.Quarantined == nil {
				out.Quarantined = []pack.Digest{}
			}
			for _, f := range rep.Findings {
				fj := findingJSON{Error: f.Error(), Reason: string(store.ReasonOf(f))}
				if errors.Is(f, store.ErrQuarantined) {
					fj.Reason = "quarantined"
				}
				var pe *store.PackError
				if errors.As(f, &pe) {
					fj.Pack = &pe.Pack
				}
				out.Findings = append(out.Findings, fj)
			}
			if err := writeJSON(env.stdout, out); err != nil {
				return err
			}
		} else {
			for _, f := range rep.Findings {
				fmt.Fprintln(env.stdout, f)
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
