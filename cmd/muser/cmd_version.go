package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/muserhq/muser/internal/version"
)

func newVersionCommand() *command {
	cmd := &command{
		name:    "version",
		summary: "print muser's version and build information",
		help: `Prints "muser VERSION GO OS/ARCH". VERSION is a semantic version with the
build's VCS revision as build metadata when built from a checkout
(0.1.0+g1a2b3c4d5e6f, with -dirty when the checkout was modified);
internal/version documents it.`,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		fmt.Fprintf(env.stdout, "muser %s %s %s/%s\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}
	return cmd
}
