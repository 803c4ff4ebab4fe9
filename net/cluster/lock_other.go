//go:build !unix

package cluster

import "sync"

var lockMu sync.Mutex

// lockFile serializes registry updates within this process only: on
// systems without flock, concurrent `muser node` commands may race.
func lockFile(string) (func(), error) {
	lockMu.Lock()
	return lockMu.Unlock, nil
}
