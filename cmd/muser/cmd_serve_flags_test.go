package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// serveRefused runs `muser serve` with args under a context that is
// already cancelled, as if SIGINT had come before it started: a command
// line the server would accept starts it and returns at once (exit 0), so
// a flag that is not refused shows as a wrong exit status, never as a
// server left running. It returns the exit status and stderr.
func serveRefused(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), &out, &errOut)
	return code, errOut.String()
}

// assertEmptyHome fails unless home holds nothing: a refused command line
// writes nothing there.
func assertEmptyHome(t *testing.T, home string) {
	t.Helper()
	ents, err := os.ReadDir(home)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("a refused command line left %v in --home", names)
	}
}

// TestServeStoreMaxBytesZero: --store-max-bytes 0 asks for a budget of
// nothing, which the server cannot keep (and used to take as "no budget",
// serving an unbounded store). It is refused, naming the flag, before
// anything is loaded or written.
func TestServeStoreMaxBytesZero(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	for _, v := range []string{"0", "0GB", "0.0MiB"} {
		t.Run(v, func(t *testing.T) {
			home := t.TempDir()
			code, errOut := serveRefused(t, "--model", storiesModel, "--home", home, "--addr", "127.0.0.1:0", "--store-max-bytes", v)
			if code != exitUsage || !strings.Contains(errOut, "--store-max-bytes") {
				t.Errorf("--store-max-bytes %s: exit %d, stderr %q; want exit %d naming --store-max-bytes", v, code, errOut, exitUsage)
			}
			assertEmptyHome(t, home)
		})
	}
}
