package replay

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayctl/replayctl/internal/connector/records"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/source"
	"github.com/replayctl/replayctl/internal/store"
)

// undecodableDump writes a JSONL export of one good record and one line
// that does not decode (line 2) into the bundle's directory, with a link
// to it and a sub-directory to spell it through; it returns its path.
func undecodableDump(t *testing.T, b *testBundle) string {
	t.Helper()
	p := filepath.Join(b.dir, "x.jsonl")
	data := `{"id":"ok-1","topic":"orders","reason_code":"timeout","payload":{"n":1}}` + "\n" + `{"id": broken` + "\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p, filepath.Join(b.dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(b.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// relToWD spells p relative to the working directory.
func relToWD(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// undecodableRefs lists the stored entries that did not decode, by ref,
// with their status.
func undecodableRefs(t *testing.T, b *testBundle) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := b.store.Entries(context.Background(), func(er *store.EntryRecord) error {
		if er.Entry.Undecodable() {
			out[er.Entry.Ref()] = er.Status
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseKeeping is --source spec, opened as the CLI opens it against the
// store (source.KeepStoredNames).
func parseKeeping(t *testing.T, b *testBundle, spec string) source.Source {
	t.Helper()
	src, err := source.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	source.KeepStoredNames([]source.Source{src}, func(ctx context.Context, ref string) (bool, error) {
		var has bool
		err := b.store.View(ctx, func(tx store.Tx) error {
			er, err := tx.Entry(ref)
			has = er != nil
			return err
		})
		return has, err
	})
	return src
}

// TestUndecodableOneEntryForEverySpelling: an undecodable record is keyed
// by its file's canonical path, so one file named four ways (relative,
// ./relative, absolute, through a sub-directory and ..) is one quarantined
// entry, not four. Keyed by the path as typed, every spelling added one.
func TestUndecodableOneEntryForEverySpelling(t *testing.T) {
	b := newBundle(t, baseRules)
	p := undecodableDump(t, b)
	rel := relToWD(t, p)
	for _, spelling := range []string{rel, "./" + rel, p, filepath.Join(b.dir, "sub") + "/../x.jsonl"} {
		b.run(b.reconciler(1), parseKeeping(t, b, "jsonl:"+spelling))
	}
	got := undecodableRefs(t, b)
	want := "jsonl:" + records.Canonical(p) + ":2"
	if len(got) != 1 || got[want] != store.StatusQuarantined {
		t.Fatalf("undecodable entries %v, want only %s quarantined", got, want)
	}
}

// TestUndecodableThroughALinkIsOneEntry: a symbolic link to the file names
// the record as the file itself does.
func TestUndecodableThroughALinkIsOneEntry(t *testing.T) {
	b := newBundle(t, baseRules)
	p := undecodableDump(t, b)
	b.run(b.reconciler(1), parseKeeping(t, b, "jsonl:"+p))
	b.run(b.reconciler(1), parseKeeping(t, b, "jsonl:"+filepath.Join(b.dir, "link.jsonl")))
	got := undecodableRefs(t, b)
	if len(got) != 1 {
		t.Fatalf("undecodable entries %v, want one for the file and its link", got)
	}
}

// asTyped is a source as replayctl read it before undecodable records were
// keyed by the canonical path: named by the path as typed.
type asTyped struct {
	source.Source
	typed string
}

func (a asTyped) Entries(ctx context.Context) iter.Seq2[entry.Entry, error] {
	return func(yield func(entry.Entry, error) bool) {
		for e, err := range a.Source.Entries(ctx) {
			if err == nil && e.Undecodable() {
				_, rest, _ := strings.Cut(e.ID, ".jsonl")
				e = records.Undecodable(e.Source, a.typed+rest, errors.New(e.DecodeError))
			}
			if !yield(e, err) {
				return
			}
		}
	}
}

// TestUndecodableKeepsItsStoredAsTypedName: a store written when entries
// were keyed by the path as typed keeps using its entry. A person released
// nothing, so the quarantine stays; the shown id stays; no second entry
// appears. Re-keyed (the reverted attempt), the entry's shown id changed
// and its quarantine was stored twice.
func TestUndecodableKeepsItsStoredAsTypedName(t *testing.T) {
	b := newBundle(t, baseRules)
	p := undecodableDump(t, b)
	rel := relToWD(t, p)
	old := "jsonl:" + rel + ":2"
	src, err := source.Parse("jsonl:" + rel)
	if err != nil {
		t.Fatal(err)
	}
	b.run(b.reconciler(1), asTyped{Source: src, typed: rel})
	before := b.entry(old)
	if before.Status != store.StatusQuarantined || before.Hold != store.HoldQuarantine {
		t.Fatalf("the old run stored %s as %s hold %q, want quarantined", old, before.Status, before.Hold)
	}

	b.run(b.reconciler(1), parseKeeping(t, b, "jsonl:"+rel))
	got := undecodableRefs(t, b)
	if len(got) != 1 || got[old] != store.StatusQuarantined {
		t.Fatalf("undecodable entries %v, want only the stored %s, still quarantined", got, old)
	}
	after := b.entry(old)
	if after.Entry.ID != before.Entry.ID || after.Entry.IdempotencyKey != before.Entry.IdempotencyKey || after.Hold != before.Hold {
		t.Errorf("stored entry changed: id %q key %q hold %q, was %q %q %q", after.Entry.ID, after.Entry.IdempotencyKey,
			after.Hold, before.Entry.ID, before.Entry.IdempotencyKey, before.Hold)
	}
	// A new spelling of the same file, with no entry of its own stored,
	// takes the canonical name: still one entry per spelling at the most.
	b.run(b.reconciler(1), parseKeeping(t, b, "jsonl:"+p))
	b.run(b.reconciler(1), parseKeeping(t, b, "jsonl:"+p))
	if got := undecodableRefs(t, b); len(got) != 2 {
		t.Errorf("undecodable entries %v, want the stored one and the canonical one", got)
	}
}
