package storetest

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// KillChild runs cmd (the test binary again, in a child role), waits for
// the line ready on its standard output, lets it run for wait and
// SIGKILLs it: a crash at an instant the caller chose. The test fails
// when the child does not announce itself or exits before the kill.
func KillChild(t testing.TB, cmd *exec.Cmd, ready string, wait time.Duration) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != ready+"\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child %v: got %q, want %s", cmd.Args, line, ready)
	}
	time.Sleep(wait)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child %v exited by itself (%v): it failed before the kill", cmd.Args, err)
	}
}
