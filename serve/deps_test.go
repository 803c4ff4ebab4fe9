package serve

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps serve on its side of the layering:
// serve → infer, store, pack; never net or cmd (go list -deps).
func TestDependencyDirection(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("skipping: no go command: %v", err)
	}
	const mod = "github.com/muserhq/muser/"
	for _, pkg := range []string{mod + "serve", mod + "serve/sched", mod + "serve/tenant", mod + "serve/strictjson"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, mod+"net/") || strings.HasPrefix(dep, mod+"cmd/") || dep == mod+"net" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	// The scheduler drives the engine front, never a backend's kernels.
	out, err := exec.Command(goBin, "list", "-deps", mod+"serve/sched").Output()
	if err != nil {
		t.Fatalf("go list -deps serve/sched: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == mod+"infer/kernels" || strings.HasPrefix(dep, mod+"infer/engine/") {
			t.Errorf("serve/sched depends on %s; it must use infer/engine only", dep)
		}
	}
	// The leaf helpers import nothing of muser's.
	for _, pkg := range []string{mod + "serve/strictjson"} {
		out, _ := exec.Command(goBin, "list", "-f", `{{join .Imports " "}}`, pkg).Output()
		for _, imp := range strings.Fields(string(out)) {
			if strings.HasPrefix(imp, mod) {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
