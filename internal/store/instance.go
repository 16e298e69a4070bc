package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// Instancer is a store that names the process instance holding it. A
// dispatching ledger record carries that name, so recovery can tell a
// dispatch still in flight in this process from one left by a dead one.
type Instancer interface {
	Instance() string
}

// newInstanceID makes a per-open process instance id: host:pid:nonce.
// The nonce tells apart two processes that reused a pid (a restart after a
// crash often gets the same pid in a container).
func newInstanceID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Instance implements Instancer: made once when the file was opened.
func (s *Bolt) Instance() string { return s.instance }

// Instance implements Instancer: made once when the pool was opened.
func (p *Postgres) Instance() string { return p.instance }
