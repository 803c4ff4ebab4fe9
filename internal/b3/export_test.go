package b3

// setModes makes the package build its own tree (tree) with the AVX-512
// kernel (wide, where the CPU has it) or the portable one, and returns
// what restores the previous settings.
func setModes(tree, wide bool) func() {
	t, w := useTree, useWide
	useTree, useWide = tree, wide && cpuWide
	return func() { useTree, useWide = t, w }
}
