package main

import (
	"context"
	"fmt"
	"time"

	"github.com/muserhq/muser/net/cluster"
)

func newNodeRmCommand() *command {
	cmd := &command{
		name:    "node rm",
		args:    "NAME",
		summary: "revoke the node NAME: its connections are refused from now on",
		help: `Marks NAME removed in this node's registry. Every later handshake with a
certificate naming it is refused, and a running server drops the
connections it holds (within its revalidation interval). The entry stays,
so that re-adding NAME admits only a certificate issued after the removal.
Run it on every node that should stop trusting NAME.

Exit status 3 if NAME is not in the registry.`,
		home: true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one NAME, got %d arguments", len(args))
		}
		h, err := cluster.Open(env.home)
		if err != nil {
			return err
		}
		p, err := h.RemovePeer(args[0], time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "removed %q (since %s): its connections are refused\n", p.Name, p.Removed.Format(time.RFC3339))
		return nil
	}
	return cmd
}
