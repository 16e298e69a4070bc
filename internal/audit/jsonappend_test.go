package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/triage"
)

// odd are strings that take every branch of encoding/json's escaping.
var odd = []string{"", "plain", "order-17:email", `q"uote`, `back\slash`, "<b>&amp;</b>", "tab\tnl\n", "\b\f\x00\x1f\x7f",
	"é 日本語", "\u2028\u2029", "bad \xff byte", "cut \xe6\x97", "\xf0\x9f\x98\x80", "exactly8", "sixteen bytes ok", "1234567<"}

type recGen struct {
	r *rand.Rand
	s string
}

func (g recGen) str() string {
	switch g.r.IntN(5) {
	case 0:
		return ""
	case 1:
		return g.s
	}
	a, b := odd[g.r.IntN(len(odd))], odd[g.r.IntN(len(odd))]
	return a[:g.r.IntN(len(a)+1)] + b
}

func (g recGen) time() time.Time {
	switch g.r.IntN(40) {
	case 0:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // MarshalJSON refuses
	case 1:
		return time.Unix(1e9, 0).In(time.FixedZone("day", 24*3600))
	case 2, 3, 4, 5:
		return time.Time{}
	}
	return time.Unix(g.r.Int64N(4e9), g.r.Int64N(1e9)).In(time.FixedZone("z", (g.r.IntN(47)-23)*1800))
}

func (g recGen) record() *Record {
	r := &Record{Seq: g.r.Uint64() >> g.r.IntN(64), Time: g.time(), Actor: g.str(), Kind: g.str(), EntryRef: g.str(), EntryID: g.str(),
		Source: g.str(), Key: g.str(), Action: triage.Action(g.str()), Reason: g.str(), PolicySnapshot: g.str(),
		SnapshotKept: g.r.IntN(2) == 0, LedgerBefore: g.str(), LedgerAfter: g.str(), Outcome: g.str()}
	if g.r.IntN(2) == 0 {
		mult := []float64{0, 1, 2, 1.5, -0.25, 1e-7, 3e21, 123456.789, 1e20, math.NaN()}
		d := &triage.Decision{EntryID: g.str(), EntryRef: g.str(), Source: g.str(), Origin: g.str(), Topic: g.str(),
			IdempotencyKey: g.str(), PayloadHash: g.str(), Class: triage.Class(g.str()), Unrecognised: g.r.IntN(2) == 0,
			ReasonCode: g.str(), Rule: g.str(), ProposedAction: triage.Action(g.str()), PolicyAction: triage.Action(g.str()),
			PolicyError: g.str(), Action: triage.Action(g.str()), KeyLifetimeExceeded: g.r.IntN(2) == 0, Owner: g.str(),
			ApproverGroup: g.str(), MaxReplays: g.r.IntN(5) - 1, PolicySnapshot: g.str(), EvidenceHash: g.str(),
			Backoff: triage.Backoff{Strategy: g.str(), Initial: time.Duration(g.r.Int64N(1e12)), Max: time.Duration(g.r.Int64N(1e13)),
				Multiplier: mult[g.r.IntN(len(mult))]},
			Ledger: triage.LedgerView{State: g.str(), Replays: g.r.IntN(3), PayloadHash: g.str(), Approved: g.r.IntN(2) == 0,
				Probe: g.str(), Lineage: g.str(), LineageReplays: g.r.IntN(3), FirstDispatch: g.time(), At: g.time()}}
		switch g.r.IntN(3) {
		case 0:
			d.Reasons = []string{g.str(), g.str()}
		case 1:
			d.Reasons = []string{}
		}
		if g.r.IntN(2) == 0 {
			d.GroupHold = &triage.GroupHold{Group: g.str(), Reason: g.str(), Until: g.time(), By: g.str()}
		}
		r.Decision = d
	}
	if g.r.IntN(2) == 0 {
		e := &entry.Entry{ID: g.str(), Source: g.str(), Origin: g.str(), Scope: g.str(), Lineage: g.str(), Topic: g.str(),
			ReasonCode: g.str(), Message: g.str(), Attempts: g.r.IntN(4), IdempotencyKey: g.str(), KeyDerived: g.r.IntN(2) == 0,
			FirstFailure: g.time(), LastFailure: g.time(), DecodeError: g.str(),
			State: entry.SourceState{Status: g.str(), Handled: g.r.IntN(2) == 0, ErrorSignature: g.str()}}
		if g.r.IntN(2) == 0 {
			e.Ancestors = []string{g.str(), g.str()}
			e.Labels = map[string]string{g.str(): g.str(), g.str(): g.str()}
			e.History = []entry.Failure{{Attempt: g.r.IntN(3), Time: g.time(), Message: g.str()}, {}}
		}
		if g.r.IntN(8) == 0 {
			e.Payload = json.RawMessage(`{"a": 1}`)
		}
		r.Input = e
	}
	switch g.r.IntN(4) {
	case 0:
		r.Detail = json.RawMessage(`{"target": "sink", "attempt":1, "s": "<x>` + "\u2028" + `"}`)
	case 1:
		r.Detail = json.RawMessage(`not json`)
	}
	return r
}

// checkRecordJSON holds appendRecordJSON to json.Marshal, and Prepare's
// body to the one json.Marshal writes.
func checkRecordJSON(t *testing.T, r *Record) {
	t.Helper()
	want, err := json.Marshal(r)
	got, ok := appendRecordJSON(nil, r)
	if ok && (err != nil || !bytes.Equal(got, want)) {
		t.Fatalf("record:\n got %s\nwant %s (%v)", got, want, err)
	}
	p := *r
	Prepare(&p)
	p.Seq, p.Time = r.Seq, r.Time
	body, perr := p.preparedBody()
	if body == nil {
		return // nothing prepared (encoding/json fails too) or a time MarshalJSON refuses
	}
	if perr != nil || !bytes.Equal(body, want) {
		t.Fatalf("prepared body:\n got %s (%v)\nwant %s (%v)", body, perr, want, err)
	}
}

func TestRecordJSONMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fast := 0
	for i := range 20000 {
		r := recGen{r: rng, s: odd[i%len(odd)]}.record()
		checkRecordJSON(t, r)
		if _, ok := appendRecordJSON(nil, r); ok {
			fast++
		}
	}
	if fast < 10000 {
		t.Fatalf("only %d of 20000 records took the appender", fast)
	}
}

func FuzzPrepareMatchesMarshal(f *testing.F) {
	for i, s := range odd {
		f.Add(uint64(i), s)
	}
	f.Fuzz(func(t *testing.T, seed uint64, s string) {
		checkRecordJSON(t, recGen{r: rand.New(rand.NewPCG(seed, 9)), s: s}.record())
	})
}

// TestRecordJSONCoversEveryField sets every field of a record (and of
// its input) and compares: a field added to Record or entry.Entry and
// missing from the appenders fails here.
func TestRecordJSONCoversEveryField(t *testing.T) {
	var r Record
	fill(t, reflect.ValueOf(&r).Elem())
	r.Input.Payload = nil
	r.Detail = json.RawMessage(`{"k":"v"}`)
	want, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := appendRecordJSON(nil, &r); !ok || !bytes.Equal(got, want) {
		t.Fatalf("every field set:\n got %s (%v)\nwant %s", got, ok, want)
	}
}

func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("v")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(3)
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		v.SetUint(4)
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`"p"`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k)
		fill(t, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 10, 0, 0, 5, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	case reflect.Interface:
		// left nil: encoding/json writes what it writes, through the
		// decision's own json.Marshal
	default:
		t.Fatalf("fill: %s (%s) is new to this test", v.Type(), v.Kind())
	}
}
