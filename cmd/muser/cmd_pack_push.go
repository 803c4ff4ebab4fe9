package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/net/wire"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
	"github.com/spf13/pflag"
)

type packPushOptions struct {
	all     bool
	streams int
	json    bool
	verbose bool
}

func (o *packPushOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.all, "all", false, "push every pack in the store (oldest first)")
	fs.IntVar(&o.streams, "streams", repl.DefaultStreams, "parallel chunk streams per transfer")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per pack")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log the replication protocol's warnings on stderr")
}

func newPackPushCommand() *command {
	var opts packPushOptions
	cmd := &command{
		name:    "pack push",
		args:    "NODE [ID...|--all]",
		summary: "send packs to a peer node over QUIC + mTLS; only missing chunks move",
		help: `Offers each pack to NODE (an enrolled peer with an address: 'muser node add'),
sealed with the cluster link secret. NODE checks the seal, its replay
ledger and the identity, answers with the chunks it lacks, and publishes the
pack once every chunk and the Merkle root verify. Chunks NODE already holds
do not move; chunks received before an interruption are kept there, so a
retry moves only what is missing. IDs may be unique hex prefixes.

The store under --home must not be in use ('muser serve' holds it: exit 5);
the peer must be listening ('muser serve --repl-addr'). On a terminal,
stderr shows each pack's bytes moved, rate and time left.

NODE is checked before the store is opened: exit status 3 when it is not
in the registry, 2 when it is this node's own name, 1 when it was removed
or has no address. Exit status 4 when NODE refused a pack (NODE recorded a
receipt, whose ID is printed) or refused this node's certificate.`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) == 0 {
			return usagef(cmd, "takes NODE and pack IDs (or --all)")
		}
		peer, refs := args[0], args[1:]
		if opts.all == (len(refs) > 0) {
			return usagef(cmd, "give pack IDs or --all, not both or neither")
		}
		if err := checkPackRefs(cmd, refs); err != nil {
			return err
		}
		if opts.streams < 1 || opts.streams > repl.MaxStreams {
			return usagef(cmd, "--streams %d is outside 1..%d", opts.streams, repl.MaxStreams)
		}
		tp := newTransferProgress(env, "push", "to", opts.json)
		rn, s, err := openReplNode(cmd, env, peer, opts.streams, opts.verbose, false, tp)
		if err != nil {
			return err
		}
		defer s.Close()
		defer rn.Close()
		var ids []pack.Digest
		if opts.all {
			infos, err := s.Packs()
			if err != nil {
				return err
			}
			for _, p := range infos {
				if !p.Quarantined {
					ids = append(ids, p.ID)
				}
			}
		} else if ids, err = resolvePacks(s, refs); err != nil {
			return err
		}
		var errs []error
		for _, id := range ids {
			res, err := rn.Push(ctx, peer, id)
			tp.finish()
			printTransfer(env, "pushed", "to", peer, id, res, err, opts.json)
			if err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
			}
		}
		return transferStatus(env, "push", len(ids), errs)
	}
	return cmd
}

// openReplNode opens the cluster directory under --home, checks that
// peer is a peer this node can dial, and opens the store and a
// replication node over them. Nothing is opened or created for a peer
// that cannot be dialed.
func openReplNode(cmd *command, env *cliEnv, peer string, streams int, verbose, create bool, tp *transferProgress) (*repl.Node, *store.Store, error) {
	h, err := cluster.Open(env.home)
	if err != nil {
		return nil, nil, err
	}
	if peer == h.Name() {
		return nil, nil, usagef(cmd, "NODE %s is this node's own name; name a peer (muser node ls)", peer)
	}
	if _, err := repl.DialPeer(h, peer); err != nil {
		return nil, nil, err
	}
	s, err := store.Open(env.home, store.Options{MustExist: !create, Node: h.Name()})
	if err != nil {
		return nil, nil, err
	}
	var logOut io.Writer = io.Discard
	if verbose {
		logOut = env.stderr
	}
	cfg := repl.Config{Store: s, Cluster: h, Streams: streams,
		Logger: slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	tp.hook(&cfg)
	rn, err := repl.New(cfg)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return rn, s, nil
}

// transferJSON is the --json form of one transfer.
type transferJSON struct {
	repl.Result
	Error   string `json:"error,omitempty"`
	Receipt string `json:"receipt,omitempty"`
}

func printTransfer(env *cliEnv, verb, prep, peer string, id pack.Digest, res repl.Result, err error, asJSON bool) {
	if res.Pack.IsZero() {
		res.Pack = id
	}
	if asJSON {
		out := transferJSON{Result: res}
		if err != nil {
			out.Error = err.Error()
			var we *wire.Error
			if errors.As(err, &we) {
				out.Receipt = we.Receipt
			}
		}
		_ = json.NewEncoder(env.stdout).Encode(out)
		return
	}
	name := res.Pack.Short()
	if res.Pack.IsZero() {
		name = "(unknown)"
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "%s %s %s: %v\n", name, prep, peer, err)
		return
	}
	held := res.Chunks - res.Moved
	state := ""
	if !res.New {
		state = ", already there"
	}
	fmt.Fprintf(env.stdout, "%s %s %s %s: %d of %d chunks moved (%s), %d already held%s; %s on the wire in %s\n",
		verb, name, prep, peer, res.Moved, res.Chunks, formatBytes(res.MovedBytes), held, state,
		formatBytes(int64(res.WireBytes)), res.Duration.Round(time.Millisecond))
}

// transferStatus returns nil when every transfer succeeded, and otherwise
// the joined errors, already reported, so that main picks the exit status
// (4 if a peer refused, 3 if a pack was not found, 1 otherwise).
func transferStatus(env *cliEnv, op string, n int, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	fmt.Fprintf(env.stderr, "%d of %d %ss failed\n", len(errs), n, op)
	return &reportedError{err: errors.Join(errs...)}
}
