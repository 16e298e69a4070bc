package maintenance

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/postgres"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// On PostgreSQL audit records are chained after they commit. With the
// store's own sealer loop handed over, the audit-sealer duty seals the
// tail on its tick, and at its stop seals what was written since, so a
// serve that stops leaves no unsealed record behind.
func TestAuditSealerSealsOnTickAndAtStop(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, testsvc.Postgres(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	pg.StopOwnSealer()
	write := func(n int) {
		t.Helper()
		for i := range n {
			if err := pg.Update(ctx, func(tx store.Tx) error {
				_, err := tx.Append(&audit.Record{Actor: "t", Kind: audit.KindDecision, EntryRef: "jsonl:x", Reason: string(rune('a' + i))})
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	unsealed := func() int {
		t.Helper()
		n, err := pg.AuditUnsealed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	write(3)
	if n := unsealed(); n != 3 {
		t.Fatalf("%d unsealed records with the store's sealer handed over, want 3", n)
	}
	before := runtime.NumGoroutine()
	ticks := newManualTicks()
	p, err := NewAuditSealer(pg, Options{Every: time.Hour, Tick: ticks.tick})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ticks.fire(t)
	if s := waitRuns(t, p, 1); s.Errors != 0 {
		t.Fatalf("seal round: %+v", s)
	}
	if n := unsealed(); n != 0 {
		t.Fatalf("%d unsealed after a round", n)
	}
	write(2)
	p.Stop()
	goroutinesBack(t, before)
	if n := unsealed(); n != 0 {
		t.Fatalf("%d unsealed after the stop's last seal", n)
	}
	v, err := audit.Verify(ctx, pg, nil)
	if err != nil || !v.OK() || v.Records != 5 {
		t.Fatalf("verify: %+v %v", v, err)
	}
}
