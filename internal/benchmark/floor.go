package benchmark

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replayctl/replayctl/internal/connector/jsonl"
	"github.com/replayctl/replayctl/internal/entry"
	"github.com/replayctl/replayctl/internal/gen"
	"github.com/replayctl/replayctl/internal/replay"
)

// floor measures the ceiling of the replay rows' "of plain POSTs" ratio
// on this machine: what no implementation of a safe replay can skip,
// with nothing of replayctl on the path and nothing durable. Each entry
// is decoded with bare encoding/json, decided by a bare prepared OPA
// evaluation of the same input (the decision rows' baseline), and its
// payload POSTed to the same local sink with the same keep-alive client
// as the plain POSTs, at 1, 8 and 32 parallel; rounds alternate with the
// plain POSTs and medians are compared. The sink, the client and OPA
// share the same two cores, so the ratio this reaches bounds the replay
// rows from above before any intent or outcome is written: when it is
// below the replay rows' target, that target cannot be met here.
func floor(ctx context.Context, c *Config) ([]Row, error) {
	n := c.size(10_000, 300)
	rounds := c.size(3, 1)
	c.progress("replay floor: bare decode + prepared eval + POST vs plain POSTs")
	_, bare, lines, err := c.replayCorpus(ctx, n)
	if err != nil {
		return nil, err
	}
	payloads := make([][]byte, len(lines))
	for i, l := range lines {
		var r bareRecord
		if err := json.Unmarshal(l, &r); err != nil {
			return nil, fmt.Errorf("replay floor: line %d: %w", i+1, err)
		}
		payloads[i] = r.Payload
	}
	s := sink()
	defer s.Close()
	var rows []Row
	for _, par := range []int{1, 8, 32} {
		c.progress(fmt.Sprintf("replay floor: %d parallel", par))
		send := poster(s.URL)
		posts := func() (time.Duration, error) {
			return parallel(par, len(payloads), func(i int) error { return send(payloads[i]) })
		}
		decided := func() (time.Duration, error) { return decideAndPost(ctx, bare, lines, par, send) }
		run := 0
		durable := func() (time.Duration, error) {
			run++
			return decideWriteAndPost(ctx, bare, lines, par, filepath.Join(c.Dir, fmt.Sprintf("floor-%d-%d.db", par, run)), send)
		}
		bareOnly := func() (time.Duration, error) {
			run++
			return bareWindows(filepath.Join(c.Dir, fmt.Sprintf("floor-bare-%d-%d.db", par, run)), payloads, (&replay.Reconciler{MaxParallel: par}).WindowSize())
		}
		var ps, ds, ws, bs []time.Duration
		for range rounds {
			for _, m := range []struct {
				fn  func() (time.Duration, error)
				out *[]time.Duration
			}{{posts, &ps}, {decided, &ds}, {durable, &ws}, {bareOnly, &bs}} {
				d, err := m.fn()
				if err != nil {
					return nil, err
				}
				*m.out = append(*m.out, d)
			}
		}
		p, d, w, b := medianDuration(ps), medianDuration(ds), medianDuration(ws), medianDuration(bs)
		rows = append(rows,
			Row{Measure: fmt.Sprintf("replay floor, %d parallel: bare decode + eval + POST, nothing durable (replays/s)", par),
				Figure: rate(n, d), Unit: "/s", Baseline: rate(n, p), Ratio: p.Seconds() / d.Seconds(),
				Note: "of plain POSTs: above it no replay goes here", Target: "bounds the 0.5x target"},
			Row{Measure: fmt.Sprintf("replay floor, %d parallel: the same + bare bbolt intents and outcomes per window (replays/s)", par),
				Figure: rate(n, w), Unit: "/s", Baseline: rate(n, p), Ratio: p.Seconds() / w.Seconds(),
				Note: "of plain POSTs: a minimal safe replay, nothing of replayctl", Target: "bounds the 0.5x target"},
			Row{Measure: fmt.Sprintf("replay floor, %d parallel: the minimal safe replay vs its durable writes alone (replays/s)", par),
				Figure: rate(n, w), Unit: "/s", Baseline: rate(n, b), Ratio: b.Seconds() / w.Seconds(),
				Note: "of bare bbolt, same writes (the replay rows' second baseline)", Target: "bounds the 0.7x target"})
	}
	return rows, nil
}

// decideAndPost decides every line on every core (bare decode, bare
// prepared eval) and POSTs each decided payload with `par` senders, as a
// replay pipeline at --max-parallel par would: decisions are not bounded
// by the dispatches in flight, only the sends are.
func decideAndPost(ctx context.Context, bare *bareEval, lines [][]byte, par int, send func([]byte) error) (time.Duration, error) {
	t0 := time.Now()
	decided := make(chan []byte, 4*par)
	var dErr error
	go func() { dErr = decideEach(ctx, bare, lines, decided); close(decided) }()
	var senders sync.WaitGroup
	sErrs := make([]error, par)
	for k := range par {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for body := range decided {
				if err := send(body); err != nil && sErrs[k] == nil {
					sErrs[k] = err
				}
			}
		}()
	}
	senders.Wait()
	if err := errors.Join(append(sErrs, dErr)...); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// decideEach decodes and decides every line on GOMAXPROCS goroutines and
// sends each decided payload to out (in no particular order).
func decideEach(ctx context.Context, bare *bareEval, lines [][]byte, out chan<- []byte) error {
	workers := runtime.GOMAXPROCS(0)
	next := make(chan int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[w] != nil {
					continue
				}
				var r bareRecord
				if err := json.Unmarshal(lines[i], &r); err != nil {
					errs[w] = fmt.Errorf("replay floor: line %d: %w", i+1, err)
					continue
				}
				p := bare.proposals[i+1]
				if p == nil {
					errs[w] = fmt.Errorf("replay floor: line %d has no policy input", i+1)
					continue
				}
				if err := bare.eval(ctx, &r, p); err != nil {
					errs[w] = err
					continue
				}
				out <- r.Payload
			}
		}()
	}
	for i := range lines {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// decideWriteAndPost is the least a safe replay does, written with
// nothing but encoding/json, OPA and bbolt: decisions on every core as
// in decideAndPost; per window of entries (reconcile's window size at
// --max-parallel par) its intents are fsynced (the bytes bareWindows
// writes) before the window's POSTs go out with par senders, and its
// outcomes after. One writer puts into each fsynced transaction the
// outcomes of every window answered so far with the intents of the next
// window decided, so windows overlap (the next one's intents are written
// while this one's requests are out) and outcomes share a later window's
// fsync; no POST starts before its intent commits.
func decideWriteAndPost(ctx context.Context, bare *bareEval, lines [][]byte, par int, path string, send func([]byte) error) (time.Duration, error) {
	db, err := openBare(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	size := (&replay.Reconciler{MaxParallel: par}).WindowSize()
	t0 := time.Now()
	decided := make(chan []byte, size)
	var dErr error
	go func() { dErr = decideEach(ctx, bare, lines, decided); close(decided) }()
	wins, sends, outs := make(chan win, 1), make(chan win, 1), make(chan win, len(lines)/size+2)
	// A stage that fails keeps draining its input, so that every stage
	// ends and the first error is returned.
	var wErr, sErr error
	go func() {
		defer close(wins)
		w := win{}
		for body := range decided {
			w.bodies = append(w.bodies, body)
			if len(w.bodies) == size {
				wins <- w
				w = win{lo: w.lo + size}
			}
		}
		if len(w.bodies) > 0 {
			wins <- w
		}
	}()
	go func() {
		for w := range sends {
			if sErr == nil {
				_, sErr = parallel(par, len(w.bodies), func(i int) error { return send(w.bodies[i]) })
			}
			outs <- w
		}
	}()
	// One writer: each transaction takes the outcomes of every window
	// answered so far and the intents of the next window decided, so a
	// window's outcomes share the fsync of a later window's intents.
	winsC, pending := wins, 0
	for winsC != nil || pending > 0 {
		var intent []win
		var done []win
		select {
		case w, ok := <-winsC:
			if !ok {
				winsC = nil
				continue
			}
			intent = append(intent, w)
		case w := <-outs:
			done = append(done, w)
		}
	more:
		for {
			select {
			case w := <-outs:
				done = append(done, w)
			default:
				break more
			}
		}
		if len(intent) == 0 && winsC != nil {
			select {
			case w, ok := <-winsC:
				if ok {
					intent = append(intent, w)
				} else {
					winsC = nil
				}
			default:
			}
		}
		if wErr == nil {
			wErr = db.write(append(done, intent...))
		}
		pending -= len(done)
		for _, w := range intent {
			pending++
			sends <- w
		}
	}
	close(sends)
	if err := errors.Join(dErr, wErr, sErr); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// win is a window of decided entries: the payloads of entries lo, lo+1, ...
type win struct {
	lo     int
	bodies [][]byte
}

// bareDB is bbolt with the buckets reconcile writes a replay to, and
// nothing of replayctl.
type bareDB struct {
	*bolt.DB
	ledger, audit, entries []byte
	seq                    uint64
	ledgerVal, auditVal    []byte
}

func openBare(path string) (*bareDB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	b := &bareDB{DB: db, ledger: []byte("ledger"), audit: []byte("audit"), entries: []byte("entries"),
		// Sizes like reconcile's records: a ledger record ~300 B, an
		// audit record carrying the bench's decision (its rule and two
		// reasons, ~64 B) ~760 B; the entry with its payload.
		ledgerVal: make([]byte, 300), auditVal: make([]byte, 700+len("default:transient")+len("reason code timeout is transient")+len("no rule matched"))}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{b.ledger, b.audit, b.entries} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// write puts, in one fsynced transaction, each entry's ledger record,
// an audit record and the entry with its payload.
func (b *bareDB) write(wins []win) error {
	return b.Update(func(tx *bolt.Tx) error {
		for _, w := range wins {
			if err := b.put(tx, w.lo, w.bodies); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *bareDB) put(tx *bolt.Tx, lo int, payloads [][]byte) error {
	for i, p := range payloads {
		e := entry.Entry{ID: fmt.Sprintf("e%08d", lo+i), Source: jsonl.Kind}
		e.EnsureKey()
		b.seq++
		var sk [8]byte
		binary.BigEndian.PutUint64(sk[:], b.seq)
		if err := tx.Bucket(b.ledger).Put([]byte(e.IdempotencyKey), b.ledgerVal); err != nil {
			return err
		}
		if err := tx.Bucket(b.audit).Put(sk[:], b.auditVal); err != nil {
			return err
		}
		if err := tx.Bucket(b.entries).Put([]byte(e.Ref()), append(make([]byte, 600), p...)); err != nil {
			return err
		}
	}
	return nil
}

// readLines reads a file's non-empty lines.
// replayCorpus is the floor rows' corpus of n auto-replayable entries:
// its spec, the bare evaluation of its rules and policy, and its lines.
func (c *Config) replayCorpus(ctx context.Context, n int) (string, *bareEval, [][]byte, error) {
	spec, err := c.corpus("replay.jsonl", gen.Options{N: n, Seed: 2, AutoOnly: true})
	if err != nil {
		return "", nil, nil, err
	}
	bare, err := c.bareEvalOf(ctx, spec)
	if err != nil {
		return "", nil, nil, err
	}
	lines, err := readLines(strings.TrimPrefix(spec, "jsonl:"))
	if err != nil {
		return "", nil, nil, err
	}
	return spec, bare, lines, nil
}

func readLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, append([]byte(nil), sc.Bytes()...))
		}
	}
	return out, sc.Err()
}
