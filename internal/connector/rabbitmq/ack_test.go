package rabbitmq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ackLog is the acker's channel as the broker sees it: it refuses an
// unknown or already acked tag, as RabbitMQ does (rabbit_channel.erl
// collect_acks: "unknown delivery tag", which closes the channel).
type ackLog struct {
	unacked map[uint64]bool
	calls   int
}

func (l *ackLog) ack(tag uint64, multiple bool) error {
	if !l.unacked[tag] {
		return fmt.Errorf("PRECONDITION_FAILED - unknown delivery tag %d", tag)
	}
	l.calls++
	for t := range l.unacked {
		if t == tag || multiple && t < tag {
			delete(l.unacked, t)
		}
	}
	return nil
}

// An acker acks a message only once it and every message before it is
// stored (or, behind an unstored one, alone), never twice; stored in
// about the order read (parallel workers) and with none unstored before
// them, in far fewer acks than messages.
func TestAckerBatchesWithoutPassingAnUnstoredMessage(t *testing.T) {
	const n = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		gap    uint64 // 0: none unstored
		window int    // stores finish out of order within this many
	}{{0, 16}, {1, 16}, {500, 16}, {n, 16}, {0, n}, {500, n}} {
		gap := c.gap
		l := &ackLog{unacked: map[uint64]bool{}}
		a := newAcker(l.ack, DefaultPrefetch)
		order := make([]uint64, 0, n)
		for tag := uint64(1); tag <= n; tag++ {
			l.unacked[tag] = true
			a.delivered(tag)
			if tag != gap {
				order = append(order, tag)
			}
		}
		for lo := 0; lo < len(order); lo += c.window {
			w := order[lo:min(lo+c.window, len(order))]
			rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
		}
		stored := map[uint64]bool{}
		for _, tag := range order {
			must(t, a.done([]uint64{tag}))
			stored[tag] = true
			for u := range uint64(n) {
				if !l.unacked[u+1] && !stored[u+1] {
					t.Fatalf("gap %d: tag %d acked before it was stored", gap, u+1)
				}
			}
		}
		must(t, a.flush())
		want := 0
		if gap != 0 {
			want = 1
		}
		if len(l.unacked) != want || gap != 0 && !l.unacked[gap] {
			t.Fatalf("gap %d: after flush %d unacked (%v), want only the unstored one", gap, len(l.unacked), l.unacked)
		}
		// Behind an unstored message a multiple ack would take it too:
		// those go one by one.
		if c.window < n && (gap == 0 || gap == n) && l.calls > n/10 {
			t.Errorf("gap %d: %d acks for %d messages: not batched", gap, l.calls, n)
		}
	}
}

// Against the real broker: 150 dead letters read, all but one stored in
// shuffled order; the batched acks (multiple=true) never take the unstored
// one with them: after the connection closes it alone is back in the DLQ.
func TestBatchedAcksLeaveTheUnstoredMessage(t *testing.T) {
	b := newBundle(t, nil)
	const n = 150
	for i := range n {
		must(t, b.ch.PublishWithContext(context.Background(), "", b.dlq, false, false, amqp.Publishing{MessageId: fmt.Sprint("m", i), Body: []byte(`{}`),
			Headers: amqp.Table{"x-first-death-queue": b.work, "x-first-death-reason": "rejected"}}))
	}
	b.waitCount(b.dlq, n)
	got := readAll(t, b.connection)
	if len(got) != n {
		t.Fatalf("read %d, want %d", len(got), n)
	}
	skip := got[10].ID
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	for i := range got {
		if got[i].ID != skip {
			b.connection.Stored(context.Background(), &got[i])
		}
	}
	if notes := b.connection.Notes(); len(notes) != 2 { // held, read
		t.Fatalf("acks failed: %v", notes)
	}
	// The run ends (Flush), then the process dies without closing: the
	// broker requeues what was not acked.
	must(t, b.connection.Flush(context.Background()))
	must(t, b.connection.reader.Close())
	b.waitCount(b.dlq, 1)
	again, err := Open(b.connSpec)
	must(t, err)
	defer again.Close()
	if rest := readAll(t, again); len(rest) != 1 || rest[0].ID != skip {
		t.Fatalf("back in the DLQ: %v, want only %s", ids(rest), skip)
	}
}
