package cu

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestCandidates(t *testing.T) {
	tests := []struct {
		name, env, goarch string
		want              []candidate
	}{
		{"env is the only candidate", "/opt/x/libcuda.so.1", "amd64", []candidate{{path: "/opt/x/libcuda.so.1", explicit: true}}},
		{"amd64", "", "amd64", []candidate{
			{path: "/usr/local/nvidia/lib64/libcuda.so.1"},
			{path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
			{path: "/usr/lib64/libcuda.so.1"},
			{path: "/usr/lib/libcuda.so.1"},
			{path: "libcuda.so.1"},
		}},
		{"arm64", "", "arm64", []candidate{
			{path: "/usr/local/nvidia/lib64/libcuda.so.1"},
			{path: "/usr/lib/aarch64-linux-gnu/libcuda.so.1"},
			{path: "/usr/lib64/libcuda.so.1"},
			{path: "/usr/lib/libcuda.so.1"},
			{path: "libcuda.so.1"},
		}},
		{"other architecture: no triplet", "", "riscv64", []candidate{
			{path: "/usr/local/nvidia/lib64/libcuda.so.1"},
			{path: "/usr/lib64/libcuda.so.1"},
			{path: "/usr/lib/libcuda.so.1"},
			{path: "libcuda.so.1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := candidates(tt.env, tt.goarch)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("candidates(%q, %q) = %+v, want %+v", tt.env, tt.goarch, got, tt.want)
			}
		})
	}
}

func TestIsCompat(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/usr/local/cuda-13.0/compat/libcuda.so.1", true},
		{"/usr/local/cuda/compat/lib.real/libcuda.so.580.65.06", true},
		{"/usr/local/cuda-12.8/compat/../compat/libcuda.so.1", true},
		{"/usr/local/nvidia/lib64/libcuda.so.1", false},
		{"/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06", false},
		{"/opt/compatibility/libcuda.so.1", false},
		{"/opt/mycompat/libcuda.so.1", false},
		{"/opt/compat", false}, // a file named compat is not in a compat directory
		{"libcuda.so.1", false},
		{"compat/libcuda.so.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := isCompat(tt.path); got != tt.want {
				t.Errorf("isCompat(%q) = %v, want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestRefuse(t *testing.T) {
	compat := "/usr/local/cuda-13.0/compat/libcuda.so.1"
	system := "/usr/local/nvidia/lib64/libcuda.so.1"
	tests := []struct {
		name     string
		c        candidate
		resolved string
		refused  bool
	}{
		{"fixed path into compat", candidate{path: "/usr/lib64/libcuda.so.1"}, compat, true},
		{"loader search into compat", candidate{path: "libcuda.so.1"}, compat, true},
		{"explicit path into compat", candidate{path: compat, explicit: true}, compat, false},
		{"fixed path, system driver", candidate{path: system}, system, false},
		{"loader search, system driver", candidate{path: "libcuda.so.1"}, system, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := refuse(tt.c, tt.resolved)
			if got := err != nil; got != tt.refused {
				t.Fatalf("refuse(%+v, %q) = %v, want refused=%v", tt.c, tt.resolved, err, tt.refused)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrCompat) {
				t.Errorf("refuse error %v does not match ErrCompat", err)
			}
			if !strings.Contains(err.Error(), tt.resolved) {
				t.Errorf("refuse error %q does not name %s", err, tt.resolved)
			}
		})
	}
}

// TestOpenCompatSymlink checks that a fixed candidate whose symbolic link
// leads into a compat directory is refused before it is opened.
func TestOpenCompatSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "cuda-13.0", "compat", "libcuda.so.1")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "lib64", "libcuda.so.1")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := open([]candidate{{path: link}})
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("open = %v, want a *LoadError", err)
	}
	if !errors.Is(err, ErrCompat) || !errors.Is(err, ErrNoDriver) {
		t.Errorf("open error %v: want it to match ErrCompat and ErrNoDriver", err)
	}
	if len(le.Tried) != 1 || le.Tried[0].Path != link {
		t.Errorf("Tried = %+v, want one attempt at %s", le.Tried, link)
	}
}

func TestOpenEnvMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nowhere", "libcuda.so.1")
	t.Setenv(EnvLib, path)
	d, err := Open()
	if err == nil {
		t.Fatalf("Open with %s=%s = %v, want an error", EnvLib, path, d)
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("error %v does not match ErrNoDriver", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not match fs.ErrNotExist", err)
	}
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("error %T is not a *LoadError", err)
	}
	if len(le.Tried) != 1 || le.Tried[0].Path != path {
		t.Errorf("Tried = %+v, want only %s", le.Tried, path)
	}
	for _, want := range []string{"libcuda.so.1", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestOpenEnvNotALibrary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libcuda.so.1")
	if err := os.WriteFile(path, []byte("plain text, not ELF\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvLib, path)
	_, err := Open()
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open of a text file = %v, want an error matching ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}

func TestLoadErrorMessage(t *testing.T) {
	e := &LoadError{Lib: "libcuda.so.1", Tried: []Attempt{
		{Path: "/a/libcuda.so.1", Err: fs.ErrNotExist},
		{Path: "libcuda.so.1", Err: errors.New("libcuda.so.1: cannot open shared object file")},
	}}
	want := "no CUDA driver: cannot load libcuda.so.1: /a/libcuda.so.1: file does not exist; libcuda.so.1: libcuda.so.1: cannot open shared object file"
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, fs.ErrNotExist) || !errors.Is(e, ErrNoDriver) {
		t.Errorf("%v does not match both ErrNoDriver and fs.ErrNotExist", e)
	}
	empty := &LoadError{Lib: "libcuda.so.1"}
	if got, want := empty.Error(), "no CUDA driver: cannot load libcuda.so.1: no candidate paths"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// stubLibs are where toolkits install the link-time stub libcuda, whose
// every function fails with CUDA_ERROR_STUB_LIBRARY.
var stubLibs = []string{
	"/usr/lib/x86_64-linux-gnu/stubs/libcuda.so",
	"/usr/local/cuda/lib64/stubs/libcuda.so",
	"/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so",
}

// TestOpenStub loads a stub libcuda where one is installed: it resolves
// every symbol, and Open refuses it because cuDriverGetVersion answers
// CUDA_ERROR_STUB_LIBRARY.
func TestOpenStub(t *testing.T) {
	var stub string
	for _, p := range stubLibs {
		if _, err := os.Stat(p); err == nil {
			stub = p
			break
		}
	}
	if stub == "" {
		t.Skipf("no stub libcuda in %v", stubLibs)
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("the driver is loaded on linux/amd64 and linux/arm64 only")
	}
	t.Setenv(EnvLib, stub)
	_, err := Open()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Open(stub %s) = %v, want a *LoadError holding a driver *Error", stub, err)
	}
	if ce.Code != codeStubLibrary || ce.Op != "cuDriverGetVersion" {
		t.Errorf("driver error %+v, want cuDriverGetVersion failing with code %d", ce, codeStubLibrary)
	}
	if ce.Name != "CUDA_ERROR_STUB_LIBRARY" {
		t.Errorf("Name = %q, want CUDA_ERROR_STUB_LIBRARY", ce.Name)
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("error %v does not match ErrNoDriver", err)
	}
}

// TestOpenSystem loads the machine's driver where there is one, GPU or not,
// and checks what it reports without a device.
func TestOpenSystem(t *testing.T) {
	d, err := Open()
	if err != nil {
		if !errors.Is(err, ErrNoDriver) {
			t.Fatalf("Open = %v, which does not match ErrNoDriver", err)
		}
		t.Skipf("no CUDA driver: %v", err)
	}
	t.Logf("driver: %v", d)
	if d.Version() < 1000 {
		t.Errorf("Version() = %d, want a CUDA version (1000·major + 10·minor)", d.Version())
	}
	if !filepath.IsAbs(d.Path()) {
		t.Errorf("Path() = %q, want an absolute path", d.Path())
	}
	if isCompat(d.Path()) && os.Getenv(EnvLib) == "" {
		t.Errorf("Path() = %q lies in a compat directory", d.Path())
	}
	if !strings.Contains(d.String(), d.Path()) {
		t.Errorf("String() = %q does not name the path", d.String())
	}
	n, err := d.DeviceCount()
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("DeviceCount error %T %v, want an *Error", err, err)
		}
		if ce.Name == "" || ce.Message == "" {
			t.Errorf("DeviceCount error %+v: the driver should name and describe code %d", ce, ce.Code)
		}
		t.Logf("DeviceCount: %v", err)
		return
	}
	t.Logf("DeviceCount: %d", n)
}
