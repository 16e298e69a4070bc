package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/storetest"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestBoltConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		s, err := store.OpenBolt(filepath.Join(t.TempDir(), "replayctl.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		p, err := store.OpenPostgres(context.Background(), testsvc.Postgres(t), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.Stop()
	os.Exit(code)
}
