package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

// TestServeListenAddrs: an --addr or --repl-addr that cannot be listened
// on (no port, a port beyond 65535, an unknown service name) is a bad
// flag: exit status 2 naming the flag, before the model is loaded and
// anything is written under --home, with or without --api-keys.
func TestServeListenAddrs(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("sk-aaaaaaaaaaaaaaaaaaaa alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"port beyond 65535", []string{"--addr", "127.0.0.1:99999"}, "--addr"},
		{"negative port", []string{"--addr", "127.0.0.1:-1"}, "--addr"},
		{"unknown service", []string{"--addr", "127.0.0.1:no-such-service"}, "--addr"},
		{"no port, with api keys", []string{"--addr", "bogus", "--api-keys", keys}, "--addr"},
		{"bad port, with api keys", []string{"--addr", "0.0.0.0:70000", "--api-keys", keys}, "--addr"},
		{"repl no port", []string{"--addr", "127.0.0.1:0", "--repl-addr", "bogus"}, "--repl-addr"},
		{"repl port beyond 65535", []string{"--addr", "127.0.0.1:0", "--repl-addr", "127.0.0.1:99999"}, "--repl-addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			// A cluster, so that --repl-addr gets past its own check.
			if c, _, errOut := runCLI(t, "cluster", "init", "--name", "alpha", "--home", home); c != exitOK {
				t.Fatalf("cluster init: exit %d, %s", c, errOut)
			}
			args := append([]string{"--model", storiesModel, "--home", home}, tc.args...)
			code, errOut := serveRefused(t, args...)
			if code != exitUsage || !strings.Contains(errOut, tc.flag) {
				t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", tc.args, code, errOut, exitUsage, tc.flag)
			}
			if _, err := os.Stat(filepath.Join(home, "ledger.db")); err == nil {
				t.Errorf("%v: refused, but a store was created under --home", tc.args)
			}
		})
	}
}

// TestServeTierFlagsRange: --tier-timeout and --tier-refresh must be
// positive and --tier-queue at least 1; a value out of range is refused
// (exit status 2 naming the flag) instead of being replaced by the
// default behind the user's back, and nothing is written under --home.
func TestServeTierFlagsRange(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	// A tier endpoint where nothing listens: a server that starts finds
	// the tier down at once and serves without it.
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "muser-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "muser-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	key := filepath.Join(t.TempDir(), "tier.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag, value string
	}{
		{"--tier-timeout", "0s"},
		{"--tier-timeout", "-5s"},
		{"--tier-refresh", "0s"},
		{"--tier-refresh", "-1m"},
		{"--tier-queue", "0"},
		{"--tier-queue", "-1"},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			home := t.TempDir()
			code, errOut := serveRefused(t, "--model", storiesModel, "--home", home, "--addr", "127.0.0.1:0",
				"--tier", "s3://muser-test/fleet", "--tier-key", key, tc.flag, tc.value)
			if code != exitUsage || !strings.Contains(errOut, tc.flag) {
				t.Errorf("%s %s: exit %d, stderr %q; want exit %d naming %s", tc.flag, tc.value, code, errOut, exitUsage, tc.flag)
			}
			assertEmptyHome(t, home)
		})
	}
}

// TestServeFlagsBeforeDevice: every flag is checked before the device is
// opened, so a bad one is exit status 2 naming it even where the --device
// cannot be opened (here, a CUDA driver that does not exist), and no GPU
// is claimed for a command line that is refused.
func TestServeFlagsBeforeDevice(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	t.Setenv("MUSER_LIBCUDA", filepath.Join(t.TempDir(), "libcuda.so.1"))
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--max-body", "0"}, "--max-body"},
		{[]string{"--max-body", "lots"}, "--max-body"},
		{[]string{"--store-max-bytes", "lots"}, "--store-max-bytes"},
		{[]string{"--responses-ttl", "-1h"}, "--responses-ttl"},
	} {
		t.Run(strings.Join(tc.args, "="), func(t *testing.T) {
			home := t.TempDir()
			args := append([]string{"--model", storiesModel, "--home", home, "--addr", "127.0.0.1:0", "--device", "cuda"}, tc.args...)
			code, errOut := serveRefused(t, args...)
			if code != exitUsage || !strings.Contains(errOut, tc.flag) {
				t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", tc.args, code, errOut, exitUsage, tc.flag)
			}
			assertEmptyHome(t, home)
		})
	}
}
