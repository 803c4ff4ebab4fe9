package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/muserhq/muser/net/cluster"
	"github.com/muserhq/muser/net/mtls"
	"github.com/spf13/pflag"
)

type clusterInitOptions struct {
	name string
	json bool
}

func (o *clusterInitOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.name, "name", "", "this node's name, a DNS label (default: the host name, if it is one)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
}

func newClusterInitCommand() *command {
	var opts clusterInitOptions
	cmd := &command{
		name:    "cluster init",
		summary: "create a cluster: its CA, this node's identity and the link secret",
		help: `Creates HOME/cluster (mode 0700, files 0600) on the first node of a cluster:
a cluster certificate authority (ECDSA P-256), this node's certificate and
key, a random link secret that seals replication offers, and an empty peer
registry. This node becomes a CA holder: it can enroll other nodes with
'muser node enroll'. Keep HOME/cluster/ca.key private.

Fails if HOME already holds a cluster identity.`,
		flags: opts.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		name := opts.name
		if name == "" {
			host, err := os.Hostname()
			if err != nil || mtls.ValidateName(strings.ToLower(host)) != nil {
				return usagef(cmd, "the host name %q is not a valid node name; give one with --name", host)
			}
			name = strings.ToLower(host)
		}
		if err := mtls.ValidateName(name); err != nil {
			return usagef(cmd, "--name: %v", err)
		}
		h, err := cluster.Init(env.home, name, time.Now())
		if err != nil {
			return err
		}
		info := h.Info()
		if opts.json {
			return json.NewEncoder(env.stdout).Encode(struct {
				ClusterID string `json:"cluster_id"`
				Name      string `json:"name"`
				CAHolder  bool   `json:"ca_holder"`
				Dir       string `json:"dir"`
			}{info.ClusterID, info.Name, true, h.Path()})
		}
		fmt.Fprintf(env.stdout, "created cluster %s in %s\nthis node is %q, a CA holder; enroll others with 'muser node enroll NAME -o BUNDLE'\n",
			info.ClusterID, h.Path(), info.Name)
		return nil
	}
	return cmd
}
