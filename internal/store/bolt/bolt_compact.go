package bolt

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Compact copies the bbolt file at src into a new file at dst without
// its free pages (bbolt's own Compact, as `bbolt compact` runs it): after
// a prune the file keeps its size, its freed pages reused by later
// writes, and this gives the space back. src must not be in use; dst must
// not exist. The copy is synced before it is reported done.
func Compact(src, dst string) (before, after int64, err error) {
	if _, err := os.Stat(dst); err == nil {
		return 0, 0, fmt.Errorf("compact: %s already exists", dst)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return 0, 0, err
	}
	in, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, 0, fmt.Errorf("compact %s: %w (is a replayctl process using it?)", src, err)
	}
	defer in.Close()
	out, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return 0, 0, err
	}
	if err := bolt.Compact(out, in, 64<<20); err != nil {
		out.Close()
		os.Remove(dst)
		return 0, 0, fmt.Errorf("compact %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return 0, 0, err
	}
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		d.Sync()
		d.Close()
	}
	fo, err := os.Stat(dst)
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), fo.Size(), nil
}
