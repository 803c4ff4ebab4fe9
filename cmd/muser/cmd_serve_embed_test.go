package main

import (
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/muserhq/muser/internal/version"
)

func TestServeModelFlags(t *testing.T) {
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("skipping: %s is absent: %v", storiesModel, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"bad pooling", []string{"--pooling", "avg"}, `--pooling is "avg"; want none, mean, cls or last`},
		{"bad alias", []string{"--alias", "my model"}, `--alias is "my model"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--model", storiesModel, "--home", t.TempDir()}, tc.args...)
			c, _, errOut := tokenizerCLI(t, "", args...)
			if c != exitUsage || !strings.Contains(errOut, tc.msg) {
				t.Errorf("got %d %q, want %d with %q", c, errOut, exitUsage, tc.msg)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	c, out, errOut := tokenizerCLI(t, "", "version")
	if c != 0 {
		t.Fatalf("muser version: exit %d, %s", c, errOut)
	}
	want := "muser " + version.String() + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	if !regexp.MustCompile(`^muser \d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)? `).MatchString(out) {
		t.Fatalf("%q does not start with a semantic version", out)
	}
}
