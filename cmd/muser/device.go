package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/cuda"
)

// deviceHelp is the --device flag's usage, shared by serve, run and bench.
const deviceHelp = "where the engine computes: cpu, or cuda[:N] (GPU N, 0 by default; exact mode, the same bits as the CPU)"

// mmapHelp is the --mmap flag's usage, shared by serve, run and bench.
const mmapHelp = "map the model file instead of reading it into memory: pages load on first use, are shared with other processes, " +
	"and the kernel may drop them; without it the CPU engine reads the file into read-only memory in huge pages, " +
	"where its decode reads the weights faster (a GPU copies them once and keeps the file mapped either way)"

// addMmapFlag registers --mmap on fs (engine.Options.Mapped).
func addMmapFlag(fs *pflag.FlagSet, dst *bool) {
	fs.BoolVar(dst, "mmap", false, mmapHelp)
}

// addDeviceFlag registers --device on fs.
func addDeviceFlag(fs *pflag.FlagSet, dst *string) {
	fs.StringVar(dst, "device", "cpu", deviceHelp)
}

// parseDevice splits a --device value into "cpu" or "cuda" and a GPU
// ordinal.
func parseDevice(s string) (kind string, ordinal int, err error) {
	switch {
	case s == "cpu":
		return "cpu", 0, nil
	case s == "cuda":
		return "cuda", 0, nil
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, "cuda:"))
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("--device %q: want cuda:N with N a GPU number from 0", s)
		}
		return "cuda", n, nil
	}
	return "", 0, fmt.Errorf("--device %q: want cpu, cuda or cuda:N", s)
}

// openDevice opens the device a valid --device value names (threads is the
// CPU engine's worker count; profile times a GPU's kernels). close releases it once every model bound on
// it is closed. A GPU that cannot be opened (no libcuda.so.1, no such GPU)
// is an error naming the library or the device: exit status 1.
func openDevice(kind string, ordinal, threads int, profile bool) (dev engine.Device, close func() error, err error) {
	return openDeviceWith(kind, ordinal, threads, cuda.Options{Profile: profile})
}

// openDeviceWith is openDevice with the CUDA options given (their Ordinal
// is ordinal's).
func openDeviceWith(kind string, ordinal, threads int, o cuda.Options) (dev engine.Device, close func() error, err error) {
	if kind == "cuda" {
		o.Ordinal = ordinal
		d, err := cuda.New(o)
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}
	return cpu.New(cpu.Options{Threads: threads}), func() error { return nil }, nil
}
