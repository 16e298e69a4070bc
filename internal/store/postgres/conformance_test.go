package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/store/storetest"
	"github.com/replayctl/replayctl/internal/testsvc"
)

func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		p, err := postgres.Open(context.Background(), testsvc.Postgres(t), store.Options{})
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
