package engine_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFrontDependencies keeps the engine front backend-neutral: it depends
// on no kernels and no backend (go list -deps), and infer as a whole never
// on store or net.
func TestFrontDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("skipping: no go command: %v", err)
	}
	const mod = "github.com/muserhq/muser/"
	out, err := exec.Command(goBin, "list", "-deps", mod+"infer/engine").Output()
	if err != nil {
		t.Fatalf("go list -deps infer/engine: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == mod+"infer/kernels", strings.HasPrefix(dep, mod+"infer/engine/"):
			t.Errorf("the engine front depends on %s", dep)
		case strings.HasPrefix(dep, mod+"store"), strings.HasPrefix(dep, mod+"net"):
			t.Errorf("infer/engine depends on %s (infer must not import store or net)", dep)
		}
	}
}
