package runs

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/replayctl/replayctl/internal/store"
)

// Memory keeps run records in this process only: for a store that cannot
// keep them. Runs are then visible only to this process's API.
type Memory struct {
	mu   sync.Mutex
	recs map[string][]byte
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{recs: map[string][]byte{}} }

// UpdateRun implements Store.
func (m *Memory) UpdateRun(_ context.Context, id string, fn func([]byte) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := fn(bytes.Clone(m.recs[id]))
	if err != nil {
		return err
	}
	m.recs[id] = next
	return nil
}

// Run implements Store.
func (m *Memory) Run(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.recs[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return bytes.Clone(b), nil
}

// Runs implements Store, newest (highest id) first.
func (m *Memory) Runs(ctx context.Context, fn func(string, []byte) error) error {
	m.mu.Lock()
	ids := make([]string, 0, len(m.recs))
	for id := range m.recs {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	slices.Sort(ids)
	slices.Reverse(ids)
	for _, id := range ids {
		b, err := m.Run(ctx, id)
		if err != nil {
			continue
		}
		if err := fn(id, b); err != nil {
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
