//go:build race

package sched

// raceDetector is true in a build with the race detector, which runs the
// property tests about ten times slower: they then draw fewer cases.
const raceDetector = true
