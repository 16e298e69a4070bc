package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
)

// newInstanceID makes a per-open process instance id: host:pid:nonce.
// The nonce tells apart two processes that reused a pid (a restart after a
// crash often gets the same pid in a container).
func newInstanceID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Instance implements Backend: made once when the file was opened. A
// dispatching ledger record carries that name, so recovery can tell a
// dispatch still in flight in this process from one left by a dead one.
func (s *Bolt) Instance() string { return s.instance }

// Instance implements Backend: made once when the pool was opened.
func (p *Postgres) Instance() string { return p.instance }

// inFlight counts the dispatches this process is making, per key. A
// dispatching record owned by this instance is only "in flight" while it
// is counted here: one whose outcome write failed (a disk error) is then
// recoverable by the next run without a restart.
type inFlight struct {
	mu sync.Mutex
	m  map[string]int
}

// BeginDispatch marks key as being dispatched by this process until the
// returned function is called. Call it before the claim commits.
func (s *Bolt) BeginDispatch(key string) (end func()) {
	s.flight.mu.Lock()
	defer s.flight.mu.Unlock()
	if s.flight.m == nil {
		s.flight.m = map[string]int{}
	}
	s.flight.m[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.flight.mu.Lock()
			defer s.flight.mu.Unlock()
			if s.flight.m[key]--; s.flight.m[key] <= 0 {
				delete(s.flight.m, key)
			}
		})
	}
}

// Dispatching reports whether this process is dispatching key right now.
func (s *Bolt) Dispatching(key string) bool {
	s.flight.mu.Lock()
	defer s.flight.mu.Unlock()
	return s.flight.m[key] > 0
}
