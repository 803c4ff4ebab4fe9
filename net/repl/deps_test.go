package repl

import (
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/muserhq/muser"

// TestDependencyDirection keeps net/ where the layout puts it: net
// packages may import pack and store but not infer, serve or cmd; pack,
// store and infer never import net; no package under net/ shares a name
// with a standard library package; the directory net/ itself holds no
// package.
func TestDependencyDirection(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not available")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	std, err := exec.Command("go", "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	stdNames := map[string]bool{}
	for _, p := range strings.Fields(string(std)) {
		stdNames[path.Base(p)] = true
	}
	under := func(p, dir string) bool { return p == module+"/"+dir || strings.HasPrefix(p, module+"/"+dir+"/") }
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		for _, d := range deps {
			switch {
			case under(pkg, "net") && (under(d, "infer") || under(d, "serve") || under(d, "cmd")):
				t.Errorf("%s imports %s: net may import pack and store only", pkg, d)
			case (under(pkg, "pack") || under(pkg, "store") || under(pkg, "infer")) && under(d, "net"):
				t.Errorf("%s imports %s: nothing below net may import it", pkg, d)
			}
		}
		if under(pkg, "net") && !strings.Contains(pkg, "/internal/") && stdNames[path.Base(pkg)] {
			t.Errorf("package %s is named like a standard library package", pkg)
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "*.go"))
	if len(files) > 0 {
		t.Errorf("net/ holds Go files %v; it must hold sub-packages only", files)
	}

}
