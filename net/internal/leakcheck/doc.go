// Package leakcheck fails a test binary that leaves goroutines running
// after its tests: net packages call Main from their TestMain.
//
// # Method
//
// After the tests, the stacks of all goroutines are taken; the main
// goroutine and the runtime's and testing package's own are ignored. Any
// other goroutine is a leak unless it exits within a grace period
// (goroutines that are shutting down when the last test returns, such as a
// closed connection's run loop, need a moment). The grace period is not a
// limit on any test: it only bounds how long a leak report is delayed.
package leakcheck
