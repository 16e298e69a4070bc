package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/testsvc"
)

// On PostgreSQL the sealer signs what it chains: a forged row after the
// head, or a head moved back over records then edited, was sealed and
// signed by the next keyed process. Writers now sign each row and the
// sealer checks the head and every row before chaining.
func TestKeyedPostgresSealerRefusesForgedRecords(t *testing.T) {
	key := []byte("k29")
	cases := []struct {
		name    string
		sql     string
		wantSeq func(head uint64) uint64
	}{
		{"insert a forged approval after the head",
			`INSERT INTO audit (seq, body) SELECT nextval('audit_seq'), convert_to('{"seq":' || currval('audit_seq') || ',"actor":"mallory","kind":"approval","outcome":"approved"}', 'UTF8')`,
			func(head uint64) uint64 { return head + 1 }},
		{"move the head back 3 and edit those records",
			`UPDATE audit_head SET seq = seq - 3, hash = (SELECT hash FROM audit WHERE seq = (SELECT seq - 3 FROM audit_head WHERE id = 1)) WHERE id = 1;
			 UPDATE audit SET body = convert_to(replace(convert_from(body, 'UTF8'), 'auto_replay', 'quarantine'), 'UTF8') WHERE seq > (SELECT seq FROM audit_head WHERE id = 1)`,
			func(head uint64) uint64 { return head - 2 }}, // the first record edited
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := testsvc.Postgres(t)
			p := openPG(t, dsn, store.Options{AuditKey: key})
			for i := range 6 {
				if _, err := appendRef(ctx, p, fmt.Sprintf("jsonl:e%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.SealAudit(ctx, true); err != nil {
				t.Fatal(err)
			}
			head, _, _, err := p.AuditSignedHead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.pool.Exec(ctx, c.sql); err != nil {
				t.Fatal(err)
			}
			// The next keyed process seals.
			next := openPG(t, dsn, store.Options{AuditKey: key})
			if _, err := next.SealAudit(ctx, true); !errors.Is(err, store.ErrAuditTampered) {
				t.Fatalf("keyed sealer on forged records: %v, want ErrAuditTampered", err)
			}
			if next.AuditTamperRefusals() == 0 {
				t.Fatal("refusal not counted")
			}
			res, err := audit.Verify(ctx, next, key)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() || res.Break.Seq != c.wantSeq(head) {
				t.Fatalf("verify must report the forgery at %d: %+v", c.wantSeq(head), res)
			}
		})
	}
}
