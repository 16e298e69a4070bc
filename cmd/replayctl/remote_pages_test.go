package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/audit"
	"github.com/replayctl/replayctl/internal/server"
	"github.com/replayctl/replayctl/internal/store"
	"github.com/replayctl/replayctl/internal/store/bolt"
)

// Issue 29 caps every list the server answers at 1000 a page; the CLI's
// --server reads follow the cursor, so `audit list` and `approvals list`
// through a server still print every record, as they do from the file.
func TestRemoteListsReadEveryPage(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "replayctl.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = server.MaxPageSize + 57
	now := time.Now().UTC()
	if err := st.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			id := fmt.Sprintf("x%05d", i)
			if _, err := tx.Append(&audit.Record{Actor: "alice", Kind: audit.KindResolve, EntryRef: "jsonl:" + id, Reason: "bulk"}); err != nil {
				return err
			}
			if err := tx.PutApproval(&store.Approval{ID: "apr_" + id, EntryRef: "jsonl:" + id, EntryID: id, Source: "jsonl",
				ApproverGroup: "g", State: store.ApprovalPending, RequestedBy: "ops-bot", RequestedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tokens, err := server.LoadTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := tokens.Create("viewer-1", server.RoleViewer, now)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "list"}, fmt.Sprintf("%d record(s)", n)},
		{[]string{"approvals", "list"}, fmt.Sprintf("%d request(s)", n)},
	} {
		var out, errb bytes.Buffer
		args := append(c.args, "--server", hs.URL, "--token", secret)
		if code := run(args, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errb.String())
		}
		if !strings.Contains(out.String(), c.want) {
			t.Fatalf("%v through the server: %q, want %q", c.args, out.String()[max(0, out.Len()-200):], c.want)
		}
	}
}
