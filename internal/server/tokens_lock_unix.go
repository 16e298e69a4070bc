//go:build unix

package server

import (
	"fmt"
	"os"
	"syscall"
)

// lockTokenFile takes an exclusive lock on path+".lock" across processes
// (flock), held while a writer reads, changes and saves the token file:
// the per-process mutex alone let two `tokens create` or `tokens revoke`
// read the same file and each save its own version, losing the other's
// token or revocation. The lock file is apart from the token file, which
// every save replaces by rename (a lock on it would follow the old inode).
func lockTokenFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
