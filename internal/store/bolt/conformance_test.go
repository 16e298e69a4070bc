package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
	"github.com/replayctl/replayctl/internal/store/storetest"
)

func TestBoltConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
