package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

func newVersionCommand() *command {
	cmd := &command{
		name:    "version",
		summary: "print muser's version and build information",
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q", args[0])
		}
		version := "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" {
				version = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					version += " " + s.Value
				}
			}
		}
		fmt.Fprintf(env.stdout, "muser %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}
	return cmd
}
