package maintenance

import (
	"context"
	"sync"
)

// Service is one background duty.
type Service interface {
	// Name is the duty's name in logs, metrics and /readyz.
	Name() string
	// Start starts the duty in the background and returns; an error means
	// it did not start.
	Start(ctx context.Context) error
	// Stop ends the duty and returns once its goroutine has ended. It may
	// be called without a Start, and more than once.
	Stop()
}

// startStop is the start/stop bookkeeping a service embeds: Start calls
// begin, runs its loop in a goroutine that closes done, and Stop cancels
// the loop's context and waits for done.
type startStop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// begin returns the loop's context and the channel the loop closes when
// it ends; ok is false when the service runs already.
func (s *startStop) begin(ctx context.Context) (_ context.Context, done chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return ctx, nil, false
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	return ctx, s.done, true
}

// Stop cancels the loop and waits for it to end.
func (s *startStop) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel, s.done = nil, nil
}
