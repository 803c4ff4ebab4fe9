package pack_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the layering of the brief: pack imports
// nothing of muser's but the leaf hashing package internal/b3 (which
// imports nothing of muser's), and store's production code imports only
// pack (not infer, net or serve).
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/muserhq/muser/"
	rules := []struct {
		dir     string
		allowed []string
	}{
		{".", []string{mod + "internal/b3"}},
		{"../internal/b3", nil},
		{"../store", []string{mod + "pack", mod + "store/vfs"}},
		{"../store/vfs", nil},
		{"../store/tier", []string{mod + "pack", mod + "store"}},
		{"../store/vfs/errorfs", []string{mod + "store/vfs"}},
	}
	for _, r := range rules {
		files, _ := filepath.Glob(filepath.Join(r.dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				if !strings.HasPrefix(p, mod) {
					continue
				}
				ok := false
				for _, a := range r.allowed {
					ok = ok || p == a
				}
				if !ok {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}
