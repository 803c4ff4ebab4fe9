//go:build !amd64 || purego

package b3

// cpuWide and useWide: no wide kernel on this architecture.
var cpuWide, useWide = false, false

func hashMany(in *[lanes]*byte, nblocks int, key *[8]uint32, ctr *[2 * lanes]uint32, flags, start, end uint32, out *[lanes][Size]byte) {
	hashManyGo(in, nblocks, key, ctr, flags, start, end, out)
}
