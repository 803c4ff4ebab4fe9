package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// command is one muser verb ("pack ls", "serve"). Each lives in its own
// cmd_<verb>.go file with an options struct whose AddFlags registers its
// flags, and a run function that does the work.
type command struct {
	name    string // full path, space separated: "pack ls"
	args    string // synopsis of positional arguments: "[ID...]"
	summary string // one line for the command list
	help    string // long description, printed by --help before the flags
	// flags registers the command's own flags. Nil means none.
	flags func(fs *pflag.FlagSet)
	// home says the command reads the data directory, so it takes --home.
	home bool
	run  func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what every command gets: its streams and the global settings.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	home           string // data directory, resolved by resolveHome
}

// usageError is a bad flag or argument. It maps to exit status 2.
type usageError struct {
	cmd *command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError for cmd.
func usagef(cmd *command, format string, a ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, a...)}
}

// outputError is a failure to write a file the command makes (its
// directory missing, the disk full, a name already taken): exit status 1
// whatever its cause, since the path at fault is an output, not a named
// input that does not exist (exit status 3).
type outputError struct {
	path string
	err  error
}

func (e *outputError) Error() string { return fmt.Sprintf("writing %s: %v", e.path, e.err) }
func (e *outputError) Unwrap() error { return e.err }

// reportedError wraps an error the command has already reported in full on
// its own output (for example "3 errors found"). main prints nothing more
// and takes the exit status from the wrapped error.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// commands returns every command, in the order `muser --help` lists them.
func commands() []*command {
	return []*command{
		newVersionCommand(),
		newModelInspectCommand(),
		newQuantizeCommand(),
		newTokenizeCommand(),
		newDetokenizeCommand(),
		newRunCommand(),
		newBenchCommand(),
		newServeCommand(),
		newPackLsCommand(),
		newPackInspectCommand(),
		newPackVerifyCommand(),
		newPackGCCommand(),
		newPackRmCommand(),
		newPackPinCommand(true),
		newPackPinCommand(false),
		newPackExportCommand(),
		newPackImportCommand(),
		newReceiptsLsCommand(),
		newReceiptsShowCommand(),
		newClusterInitCommand(),
		newNodeEnrollCommand(),
		newNodeJoinCommand(),
		newNodeAddCommand(),
		newNodeLsCommand(),
		newNodeRmCommand(),
		newPackPushCommand(),
		newPackPullCommand(),
	}
}

// dispatch finds the command named by the longest matching prefix of args,
// parses its flags and runs it.
func dispatch(ctx context.Context, env *cliEnv, args []string) error {
	all := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" && len(args) == 1 {
		printRootHelp(env.stdout, all)
		return nil
	}
	if args[0] == "help" {
		args = append(args[1:], "--help")
	}
	var (
		cmd  *command
		used int
	)
	for _, c := range all {
		words := strings.Fields(c.name)
		if len(words) > len(args) || len(words) <= used {
			continue
		}
		match := true
		for i, w := range words {
			if args[i] != w {
				match = false
				break
			}
		}
		if match {
			cmd, used = c, len(words)
		}
	}
	if cmd == nil {
		// A group word alone ("muser pack") lists its commands.
		if sub := subcommands(all, args[0]); len(sub) > 0 {
			if len(args) == 1 || args[1] == "-h" || args[1] == "--help" {
				printGroupHelp(env.stdout, args[0], sub)
				return nil
			}
			return &usageError{err: fmt.Errorf("unknown command %q; run 'muser %s --help'", args[0]+" "+args[1], args[0])}
		}
		return &usageError{err: fmt.Errorf("unknown command %q; run 'muser --help'", args[0])}
	}

	fs := pflag.NewFlagSet("muser "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	help := fs.BoolP("help", "h", false, "show this help")
	if cmd.home {
		fs.StringVar(&env.home, "home", "", "data directory (default $MUSER_HOME, else ~/.muser)")
	}
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	if err := fs.Parse(args[used:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printCommandHelp(env.stdout, cmd, fs)
			return nil
		}
		return &usageError{cmd: cmd, err: err}
	}
	if *help {
		printCommandHelp(env.stdout, cmd, fs)
		return nil
	}
	if cmd.home {
		home, err := resolveHome(env.home)
		if err != nil {
			return &usageError{cmd: cmd, err: err}
		}
		env.home = home
	}
	return cmd.run(ctx, env, fs.Args())
}

// resolveHome applies the --home rules: the flag, else $MUSER_HOME, else
// ~/.muser.
func resolveHome(flag string) (string, error) {
	home := flag
	if home == "" {
		home = os.Getenv("MUSER_HOME")
	}
	if home == "" {
		dir, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --home given, MUSER_HOME unset, and no user home directory: %w", err)
		}
		home = filepath.Join(dir, ".muser")
	}
	return filepath.Abs(home)
}

func subcommands(all []*command, group string) []*command {
	var out []*command
	for _, c := range all {
		if strings.HasPrefix(c.name, group+" ") {
			out = append(out, c)
		}
	}
	return out
}

func printRootHelp(w io.Writer, all []*command) {
	fmt.Fprint(w, `muser serves LLM inference from GGUF models and keeps every prefill as a
verified, content-addressed KV pack that later requests, restarts and other
hosts reuse.

Usage:
  muser COMMAND [flags] [args]

Commands:
`)
	width := 0
	for _, c := range all {
		width = max(width, len(c.name))
	}
	for _, c := range all {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command takes --help. Commands that read the data directory take
--home DIR (default $MUSER_HOME, else ~/.muser). The CPU engine uses the
best instruction set the CPU has (amx, avx512, avx2, else generic Go);
$MUSER_ISA names a lower one (same results, slower).

`+exitStatusHelp)
}

func printGroupHelp(w io.Writer, group string, sub []*command) {
	fmt.Fprintf(w, "Usage:\n  muser %s COMMAND [flags] [args]\n\nCommands:\n", group)
	width := 0
	for _, c := range sub {
		width = max(width, len(c.name))
	}
	for _, c := range sub {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprint(w, "\n"+exitStatusHelp)
}

func printCommandHelp(w io.Writer, cmd *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage:\n  muser %s [flags]", cmd.name)
	if cmd.args != "" {
		fmt.Fprintf(w, " %s", cmd.args)
	}
	fmt.Fprintf(w, "\n\n%s\n", cmd.summary)
	if cmd.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(cmd.help, "\n"))
	}
	fmt.Fprintf(w, "\nFlags:\n%s\n%s", fs.FlagUsagesWrapped(100), exitStatusHelp)
}
