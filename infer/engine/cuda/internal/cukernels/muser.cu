// muser.cu: the one translation unit of muser's CUDA exact-mode kernels
// (scripts/cuda/build-kernels.sh compiles it to muser_sm90.cubin and
// muser_compute90.ptx). Each included file documents its kernels; doc.go
// and launch.go describe them for the Go side.
#include "common.cuh"
#include "quant.cuh"
#include "weights.cuh"
#include "mmq.cuh"
#include "mmf.cuh"
#include "rowops.cuh"
#include "attention.cuh"
#include "ropeattn.cuh"
#include "selftest.cuh"
