package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/mtls"
	"github.com/spf13/pflag"
)

type nodeJoinOptions struct {
	json bool
}

func (o *nodeJoinOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
}

func newNodeJoinCommand() *command {
	var opts nodeJoinOptions
	cmd := &command{
		name:    "node join",
		args:    "BUNDLE",
		summary: "join a cluster with a bundle from 'muser node enroll'",
		help: `Checks the bundle (its certificate must chain to its CA, match its key and
be valid now) and installs it in HOME/cluster (mode 0700, files 0600): this
node's certificate and key, the cluster CA certificate and the link secret.
The issuing node is added to the registry without an address; give it one
with 'muser node add NAME ADDR'. Delete the bundle afterwards.

Fails if HOME already holds a cluster identity.`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) != 1 {
			return usagef(cmd, "takes exactly one BUNDLE file, got %d arguments", len(args))
		}
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(f, mtls.MaxBundleSize+1))
		f.Close()
		if err != nil {
			return err
		}
		b, err := mtls.ParseBundle(data)
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		h, err := cluster.Join(env.home, b, time.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		info := h.Info()
		if opts.json {
			return json.NewEncoder(env.stdout).Encode(struct {
				ClusterID string `json:"cluster_id"`
				Name      string `json:"name"`
				Issuer    string `json:"issuer"`
				Dir       string `json:"dir"`
			}{info.ClusterID, info.Name, b.Issuer, h.Path()})
		}
		fmt.Fprintf(env.stdout, "joined cluster %s as %q in %s\nregistered issuer %q without an address: run 'muser node add %s HOST:PORT' to dial it\n",
			info.ClusterID, info.Name, h.Path(), b.Issuer, b.Issuer)
		return nil
	}
	return cmd
}
