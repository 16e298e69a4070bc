//go:build unix

package server

import (
	"fmt"
	"os"
	"syscall"
)

// fileID is the device and inode of fi: a file replaced by rename (as
// editors and ConfigMap updates do) changes it even at the same size and
// mtime.
func fileID(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d.%d", st.Dev, st.Ino)
	}
	return ""
}
