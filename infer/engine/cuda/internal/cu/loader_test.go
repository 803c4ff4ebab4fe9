package cu

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// envLoaderChild makes the test binary act as TestLoaderSearch's child:
// dlopen "libcuda.so.1" through the loader's search (LD_LIBRARY_PATH, set
// by the parent, is read only at process start) and print what it found.
const envLoaderChild = "MUSER_CU_LOADER_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envLoaderChild) == "1" {
		os.Exit(loaderChild(os.Stdout))
	}
	os.Exit(m.Run())
}

func loaderChild(w io.Writer) int {
	h, err := sysDlopen(libName)
	if err != nil {
		fmt.Fprintf(w, "dlopen: %v\n", err)
		return 1
	}
	fmt.Fprintf(w, "loaded: %s\n", sysLoadedPath(h))
	_, err = open([]candidate{{path: libName}})
	fmt.Fprintf(w, "compat: %v\n", errors.Is(err, ErrCompat))
	fmt.Fprintf(w, "open: %v\n", err)
	return 0
}

// TestLoaderSearch puts a stub libcuda, named libcuda.so.1, in a
// directory on LD_LIBRARY_PATH and checks that the loader's search finds
// it, that dlinfo reports its path, and that it is refused when the
// directory is named compat and tried (and refused as a stub) otherwise.
func TestLoaderSearch(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("the driver is loaded on linux/amd64 and linux/arm64 only")
	}
	var stub string
	for _, p := range stubLibs {
		if _, err := os.Stat(p); err == nil {
			stub = p
			break
		}
	}
	if stub == "" {
		t.Skipf("no stub libcuda in %v to stand in for the driver", stubLibs)
	}
	image, err := os.ReadFile(stub)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir        string
		compat     bool
		openSuffix string // how the attempt failed
	}{
		{dir: "cuda-13.0/compat", compat: true, openSuffix: "resolves to " + filepath.Join(root, "cuda-13.0/compat", libName)},
		{dir: "nvidia/lib64", compat: false, openSuffix: "cuDriverGetVersion: CUDA_ERROR_STUB_LIBRARY (34)"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			dir := filepath.Join(root, tt.dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			lib := filepath.Join(dir, libName)
			if err := os.WriteFile(lib, image, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envLoaderChild+"=1", "LD_LIBRARY_PATH="+dir, EnvLib+"=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 3 {
				t.Fatalf("child printed %q, want three lines", out)
			}
			if got, want := lines[0], "loaded: "+lib; got != want {
				t.Errorf("child %q, want %q", got, want)
			}
			if got, want := lines[1], fmt.Sprintf("compat: %v", tt.compat); got != want {
				t.Errorf("child %q, want %q", got, want)
			}
			if !strings.HasSuffix(lines[2], tt.openSuffix) {
				t.Errorf("child %q, want it to end in %q", lines[2], tt.openSuffix)
			}
		})
	}
}
