package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// NewInstanceID makes a per-open process instance id: host:pid:nonce.
// The nonce tells apart two processes that reused a pid (a restart after a
// crash often gets the same pid in a container).
func NewInstanceID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
