package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/group"
	"github.com/replayctl/replayctl/internal/idempotency"
	"github.com/replayctl/replayctl/internal/triage"
)

// awkward are strings that take every branch of encoding/json's string
// escaping: HTML characters, control characters with and without a short
// escape, U+2028/U+2029, invalid and cut UTF-8, multi-byte runes at every
// offset of an 8-byte word.
var awkward = []string{
	"", "x", "plain-ascii-id-0001", "order-17:email", `quo"te`, `back\slash`, "<b>&amp;</b>", "tab\there",
	"nl\nline\r\n", "\b\f\x00\x01\x1f\x7f", "é ü 日本語", "\u2028\u2029 separators", "bad \xff byte", "\xc3",
	"cut \xe6\x97", "\xf0\x9f\x98\x80 emoji", "exactly8", "sixteen bytes ok", "1234567<", "ab\u2028cdefgh",
	"a very long message with no escapes at all, well past a few words of eight bytes each",
}

// gen makes random records from r, mixing awkward strings with s (the
// fuzzer's).
type gen struct {
	r *rand.Rand
	s string
}

func (g gen) str() string {
	switch g.r.IntN(6) {
	case 0:
		return ""
	case 1:
		return g.s
	case 2:
		// Splice awkward pieces together at random points.
		a, b := awkward[g.r.IntN(len(awkward))], awkward[g.r.IntN(len(awkward))]
		return a[:g.r.IntN(len(a)+1)] + b
	default:
		return awkward[g.r.IntN(len(awkward))]
	}
}

func (g gen) time() time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("plus", 5*3600+30*60), time.FixedZone("minus", -8*3600),
		time.FixedZone("odd", 3600+17), time.FixedZone("nearly", 23*3600+59*60)}
	// One time in 60 is one MarshalJSON refuses (and so must the
	// appender): a year outside 0-9999, an offset of a day or more.
	switch g.r.IntN(60) {
	case 0:
		return time.Date(10000+g.r.IntN(5), 1, 2, 3, 4, 5, 0, time.UTC)
	case 1:
		return time.Date(-g.r.IntN(3), 1, 2, 3, 4, 5, 0, time.UTC)
	case 2:
		return time.Unix(g.r.Int64N(4e9), 0).In(time.FixedZone("day", 24*3600))
	case 3:
		return time.Unix(g.r.Int64N(4e9), 0).In(time.FixedZone("far", -99*3600))
	case 4, 5, 6, 7, 8, 9, 10, 11:
		return time.Time{}
	}
	t := time.Unix(g.r.Int64N(4e9), g.r.Int64N(1e9)*int64(g.r.IntN(2)))
	if g.r.IntN(3) == 0 {
		t = t.Truncate(time.Millisecond)
	}
	return t.In(zones[g.r.IntN(len(zones))])
}

func (g gen) strs() []string {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+g.r.IntN(3))
	for i := range out {
		out[i] = g.str()
	}
	return out
}

func (g gen) entryRecord() *EntryRecord {
	e := entry.Entry{ID: g.str(), Source: g.str(), Origin: g.str(), Scope: g.str(), Lineage: g.str(), Ancestors: g.strs(),
		Topic: g.str(), ReasonCode: g.str(), Message: g.str(), Attempts: g.r.IntN(5) - 1, IdempotencyKey: g.str(),
		KeyDerived: g.r.IntN(2) == 0, FirstFailure: g.time(), LastFailure: g.time(), DecodeError: g.str()}
	if n := g.r.IntN(4); n > 0 {
		e.Labels = map[string]string{}
		for range n {
			e.Labels[g.str()] = g.str()
		}
	} else if g.r.IntN(2) == 0 {
		e.Labels = map[string]string{}
	}
	if g.r.IntN(2) == 0 {
		e.State = entry.SourceState{Status: g.str(), Handled: g.r.IntN(2) == 0, JobStatus: g.str(),
			ManualReviewRequired: g.r.IntN(2) == 0, ReprocessIneligible: g.r.IntN(2) == 0, PolicySnapshot: g.str(), ErrorSignature: g.str()}
	}
	for range g.r.IntN(3) {
		f := entry.Failure{Time: g.time(), ReasonCode: g.str(), ErrorType: g.str(), Message: g.str(), Step: g.str()}
		if g.r.IntN(2) == 0 {
			f.Attempt = g.r.IntN(100) - 10
		}
		e.History = append(e.History, f)
	}
	if g.r.IntN(3) == 0 {
		e.History = []entry.Failure{}
	}
	if g.r.IntN(2) == 0 {
		e.Payload = json.RawMessage(`{"order": 17}`)
	}
	r := &EntryRecord{Entry: e, Status: g.str(), Class: triage.Class(g.str()), Action: triage.Action(g.str()), Owner: g.str(),
		ApproverGroup: g.str(), Reason: g.str(), Evidence: g.str(), ApprovalID: g.str(), Hold: g.str(), Probe: g.str(),
		WriteBackPending: g.str(), Settled: g.r.IntN(2) == 0, FirstSeen: g.time(), LastSeen: g.time(), NextAttemptAt: g.time()}
	if g.r.IntN(2) == 0 {
		r.LastDecision = g.r.Uint64() >> g.r.IntN(64)
	}
	if g.r.IntN(2) == 0 {
		r.Group = &group.Key{Source: g.str(), Topic: g.str(), Class: g.str(), Error: g.str()}
	}
	return r
}

func (g gen) ledger() *idempotency.Record {
	r := &idempotency.Record{Key: g.str(), State: idempotency.State(g.str()), EntryRef: g.str(), PayloadHash: g.str(),
		Replays: g.r.IntN(10) - 2, LastError: g.str(), Created: g.time(), Updated: g.time(), Dispatched: g.time(),
		FirstDispatched: g.time(), Owner: g.str()}
	if g.r.IntN(2) == 0 {
		r.Rearmed, r.NotSent = g.r.IntN(4)-1, g.r.IntN(4)-1
	}
	return r
}

// checkHot holds EncodeEntryHot, EncodeHotRecord and the appenders to
// encoding/json for one entry and one ledger record.
func checkHot(t *testing.T, r *EntryRecord, l *idempotency.Record) {
	t.Helper()
	se := EncodeEntry(r).(*StoredEntry)
	want, wantErr := json.Marshal(se)
	got, ok := appendStoredEntryJSON(nil, se)
	if ok && (wantErr != nil || !bytes.Equal(got, want)) {
		t.Fatalf("entry record:\n got %s\nwant %s (%v)", got, want, wantErr)
	}
	for _, enc := range []func() ([]byte, error){
		func() ([]byte, error) { return EncodeEntryHot(r) },
		func() ([]byte, error) { return EncodeHotRecord(se) },
	} {
		stored, err := enc()
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("entry record: error %v, encoding/json's %v", err, wantErr)
		}
		if err != nil {
			continue
		}
		js, err := RecordJSON(stored)
		if err != nil || !bytes.Equal(js, want) {
			t.Fatalf("entry record stored as\n%s (%v)\nwant %s", js, err, want)
		}
	}

	want, wantErr = json.Marshal(l)
	got, ok = appendLedgerJSON(nil, l)
	if ok && (wantErr != nil || !bytes.Equal(got, want)) {
		t.Fatalf("ledger record:\n got %s\nwant %s (%v)", got, want, wantErr)
	}
	stored, err := EncodeHotRecord(l)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("ledger record: error %v, encoding/json's %v", err, wantErr)
	}
	if err == nil {
		if js, err := RecordJSON(stored); err != nil || !bytes.Equal(js, want) {
			t.Fatalf("ledger record stored as\n%s (%v)\nwant %s", js, err, want)
		}
	}
}

func TestHotJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for i := range 20000 {
		g := gen{r: r, s: awkward[i%len(awkward)]}
		rec, l := g.entryRecord(), g.ledger()
		checkHot(t, rec, l)
		if _, ok := appendEntryRecordJSON(nil, rec); ok {
			fast++
		}
	}
	// The generator's odd times send some records to encoding/json; most
	// must take the appender, or this test checks nothing of it.
	if fast < 10000 {
		t.Fatalf("only %d of 20000 records took the appender", fast)
	}
}

func FuzzHotJSONMatchesEncodingJSON(f *testing.F) {
	for i, s := range awkward {
		f.Add(uint64(i), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, s string) {
		// s goes into every string field at once, maps and lists
		// included: bounded, so that an input the fuzzer grew large does
		// not make each execution slow (a 20000x smoke run took 3-75 s
		// as the cached corpus grew). What matters is its bytes, not its
		// length.
		if len(s) > 512 {
			s = s[:512]
		}
		g := gen{r: rand.New(rand.NewPCG(seed, 7)), s: s}
		checkHot(t, g.entryRecord(), g.ledger())
		// s in every field at once.
		e := &EntryRecord{Entry: entry.Entry{ID: s, Source: s, Ancestors: []string{s, s}, Labels: map[string]string{s: s, s + "x": s},
			History: []entry.Failure{{Message: s}}, State: entry.SourceState{Status: s}}, Status: s, Reason: s, Group: &group.Key{Error: s}}
		checkHot(t, e, &idempotency.Record{Key: s, LastError: s, Owner: s})
	})
}

// fillAll sets every field reachable from v to a value that is not its
// zero, so that a field added to a record type and missing from the
// appenders shows as a difference from encoding/json.
func fillAll(t *testing.T, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("v")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(3)
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		v.SetUint(4)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(t, v.Elem(), depth+1)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // payloads: the caller clears them
			v.SetBytes([]byte(`"p"`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillAll(t, v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillAll(t, k, depth+1)
		fillAll(t, e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 10, 0, 0, 5, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(t, v.Field(i), depth+1)
			}
		}
	default:
		t.Fatalf("fillAll: %s (%s) is new to this test and to the appenders", v.Type(), v.Kind())
	}
}

func TestHotJSONCoversEveryField(t *testing.T) {
	var r EntryRecord
	fillAll(t, reflect.ValueOf(&r).Elem(), 0)
	r.Entry.Payload = nil
	var l idempotency.Record
	fillAll(t, reflect.ValueOf(&l).Elem(), 0)
	want, _ := json.Marshal(EncodeEntry(&r))
	if got, ok := appendEntryRecordJSON(nil, &r); !ok || !bytes.Equal(got, want) {
		t.Fatalf("every field set:\n got %s (%v)\nwant %s", got, ok, want)
	}
	want, _ = json.Marshal(&l)
	if got, ok := appendLedgerJSON(nil, &l); !ok || !bytes.Equal(got, want) {
		t.Fatalf("every ledger field set:\n got %s (%v)\nwant %s", got, ok, want)
	}
	// A payload held inline is encoding/json's to write.
	se := StoredEntry{EntryRecord: r, PayloadBytes: []byte("raw")}
	if _, ok := appendStoredEntryJSON(nil, &se); ok {
		t.Fatal("an inline payload took the appender")
	}
}

// BenchmarkEncodeEntryHot is the entry record a replay stores, encoded
// by the appender and by encoding/json (both then s2).
func BenchmarkEncodeEntryHot(b *testing.B) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	r := &EntryRecord{Entry: entry.Entry{ID: "e17", Source: "jsonl", Origin: "dlq.jsonl:17", Topic: "orders", ReasonCode: "HTTP_503",
		Message: "upstream unavailable", Attempts: 3, IdempotencyKey: "order-17:email", FirstFailure: t0, LastFailure: t0,
		Labels: map[string]string{"tenant": "acme"}, Payload: json.RawMessage(`{"order":17}`)},
		Status: StatusReplaying, Class: "transient", Action: "auto_replay", Reason: "transient failure, budget left",
		LastDecision: 123456, Evidence: "sha256:0123456789abcdef0123456789abcdef", FirstSeen: t0, LastSeen: t0}
	b.Run("appender", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeEntryHot(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeWith(EncodeEntry(r), CompressHotRecord); err != nil {
				b.Fatal(err)
			}
		}
	})
}
