//go:build !amd64

package kernels

import "github.com/muserhq/muser/infer/ggml"

var bestISA = ISAGeneric

func archImpl(ggml.Type) matmulImpl { return nil }

func archPrepare(*acts, ggml.Type) {}

func rawMaxTokens(ggml.Type) int { return 4 }

func archRaw(ggml.Type) bool { return false }

func hasRawTAVX2(ggml.Type) bool { return false }
