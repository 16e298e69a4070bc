package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func chain(t *testing.T, n int) []Sealed {
	t.Helper()
	prev := Genesis
	var out []Sealed
	for i := 1; i <= n; i++ {
		s, err := Seal(&Record{Seq: uint64(i), Time: time.Date(2026, 11, 1, 0, 0, i, 0, time.UTC), Actor: "alice",
			Kind: KindDecision, EntryRef: "cordum:j" + string(rune('0'+i))}, prev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
		prev = s.Hash
	}
	return out
}

func verify(recs []Sealed, keys []uint64) *Break {
	v := NewVerifier()
	for i, s := range recs {
		if b := v.Next(keys[i], s); b != nil {
			return b
		}
	}
	return nil
}

func seqs(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

func TestIntactChainVerifies(t *testing.T) {
	recs := chain(t, 5)
	v := NewVerifier()
	for i, s := range recs {
		if b := v.Next(uint64(i+1), s); b != nil {
			t.Fatalf("intact chain broken: %v", b)
		}
	}
	if v.Count() != 5 || v.Head() != recs[4].Hash {
		t.Fatalf("count %d head %s", v.Count(), v.Head())
	}
}

func TestChangedRecordIsFound(t *testing.T) {
	recs := chain(t, 5)
	recs[2].Body = json.RawMessage(strings.Replace(string(recs[2].Body), "alice", "mallory", 1))
	b := verify(recs, seqs(5))
	if b == nil || b.Seq != 3 || !strings.Contains(b.Reason, "changed") {
		t.Fatalf("got %v, want break at 3 (changed)", b)
	}
}

func TestDeletedRecordIsFound(t *testing.T) {
	recs := chain(t, 5)
	keys := seqs(5)
	recs = append(recs[:2], recs[3:]...)
	keys = append(keys[:2], keys[3:]...)
	b := verify(recs, keys)
	if b == nil || b.Seq != 4 {
		t.Fatalf("got %v, want break at 4", b)
	}
}

func TestReorderedRecordsAreFound(t *testing.T) {
	recs := chain(t, 5)
	// Swap the values of keys 2 and 3, as an attacker editing the file would.
	recs[1], recs[2] = recs[2], recs[1]
	b := verify(recs, seqs(5))
	if b == nil || b.Seq != 2 {
		t.Fatalf("got %v, want break at 2", b)
	}
}

func TestRehashedRecordStillBreaksTheNextLink(t *testing.T) {
	recs := chain(t, 5)
	// An attacker who recomputes the changed record's own hash still breaks
	// the following record's previous-hash link.
	r, _ := recs[1].Open()
	r.Actor = "mallory"
	forged, err := Seal(&r, recs[1].Prev)
	if err != nil {
		t.Fatal(err)
	}
	recs[1] = forged
	b := verify(recs, seqs(5))
	if b == nil || b.Seq != 3 {
		t.Fatalf("got %v, want break at 3", b)
	}
}

// TestChainHashFormula holds chainHash to the formula every stored chain
// was hashed with: sha256 of "%d\n%s\n" (seq, prev) then the body.
func TestChainHashFormula(t *testing.T) {
	for _, c := range []struct {
		seq  uint64
		prev string
		body string
	}{{1, Genesis, `{"seq":1}`}, {0, "", ""}, {18446744073709551615, "sha256:ab", strings.Repeat("x", 5000)}} {
		h := sha256.New()
		fmt.Fprintf(h, "%d\n%s\n", c.seq, c.prev)
		h.Write([]byte(c.body))
		want := "sha256:" + hex.EncodeToString(h.Sum(nil))
		if got := chainHash(c.seq, c.prev, []byte(c.body)); got != want {
			t.Fatalf("chainHash(%d, %q, %d bytes) = %s, want %s", c.seq, c.prev, len(c.body), got, want)
		}
	}
}
