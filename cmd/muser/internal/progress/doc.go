// Package progress draws one self-updating status line on a terminal for
// a long command: what is done of the total (bytes, tokens or items), the
// rate, and the time left.
//
// # Where it draws
//
// Only on a terminal: New takes the decision (IsTerminal for a real
// stream), so that a redirected stderr, a pipe or a --json run gets no
// output at all, and tests drive a Meter with a plain buffer and a fake
// clock. Redraws are throttled (MinInterval) and each ends with the
// erase-to-end-of-line sequence, so a shorter line leaves no debris;
// Finish draws the final state and ends the line.
package progress
