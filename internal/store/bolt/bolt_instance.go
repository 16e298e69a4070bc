package bolt

import (
	"sync"
)

// Instance implements Backend: made once when the file was opened. A
// dispatching ledger record carries that name, so recovery can tell a
// dispatch still in flight in this process from one left by a dead one.
func (s *Bolt) Instance() string { return s.instance }

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
