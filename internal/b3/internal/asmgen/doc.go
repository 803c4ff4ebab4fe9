// Command asmgen writes hash_amd64.s, the sixteen-lane AVX-512 BLAKE3
// compression kernel of package b3 (go generate in internal/b3).
package main
