package main

import (
	"context"

	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/pack"
	"github.com/spf13/pflag"
)

type packPullOptions struct {
	json    bool
	verbose bool
}

func (o *packPullOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object per pack")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log the replication protocol's warnings on stderr")
}

func newPackPullCommand() *command {
	var opts packPullOptions
	cmd := &command{
		name:    "pack pull",
		args:    "NODE ID...",
		summary: "fetch packs from a peer node; only missing chunks move",
		help: `Asks NODE for each pack (a full hex ID or a prefix unique on NODE) and
receives it as 'pack push' sends one: the offer's seal, the replay ledger,
the identity and the Merkle root are checked before any chunk moves, only
the chunks this store lacks are sent, each is verified against its ID as it
arrives, and the pack becomes visible only when all are in. The store is
created if absent, with the default block size (64 tokens); a pack whose
block size differs from the store's is refused (block-size). On a
terminal, stderr shows each pack's bytes moved, rate and time left.

NODE is checked before the store is opened or created: exit status 3
when it is not in the registry, 2 when it is this node's own name, 1 when
it was removed or has no address. Exit status 3 when NODE does not hold a
pack; 4 when this node refused what NODE sent (a receipt records why:
'muser receipts ls').`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) < 2 {
			return usagef(cmd, "takes NODE and at least one pack ID")
		}
		peer, refs := args[0], args[1:]
		if err := checkPackRefs(cmd, refs); err != nil {
			return err
		}
		tp := newTransferProgress(env, "pull", "from", opts.json)
		rn, s, err := openReplNode(cmd, env, peer, repl.DefaultStreams, opts.verbose, true, tp)
		if err != nil {
			return err
		}
		defer s.Close()
		defer rn.Close()
		var errs []error
		for _, ref := range refs {
			res, err := rn.Pull(ctx, peer, ref)
			tp.finish()
			var id pack.Digest
			if res.Pack.IsZero() {
				if d, perr := pack.ParseDigest(ref); perr == nil {
					id = d
				}
			}
			printTransfer(env, "pulled", "from", peer, id, res, err, opts.json)
			if err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
			}
		}
		return transferStatus(env, "pull", len(refs), errs)
	}
	return cmd
}
