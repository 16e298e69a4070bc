package bolt

import (
	"os"
	"path/filepath"
)

// The stored formats these tests look for in the file, as store's
// compress.go writes them: spelled out here, so that a change to the
// bytes a file holds fails a test.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	s2Magic   = []byte{0xff, 's', '2'}
	// zdictV1 is store's dictionary 1 (zdict_v1.txt, beside compress.go).
	zdictV1 = mustRead(filepath.Join("..", "zdict_v1.txt"))
)

const (
	zdictV1ID        = 1
	payloadRaw  byte = 0
	payloadZstd byte = 1
	payloadS2   byte = 2
)

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}
