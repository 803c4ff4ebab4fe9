// Package cudatest opens the GPU for the tests of packages that run
// models on the CUDA backend: Device returns a device or skips the test
// saying why there is none, and with MUSER_REQUIRE_CUDA=1 (the GPU
// machine's runs) fails it instead, so a GPU run cannot pass by skipping.
package cudatest
