package rabbitmq

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
)

func ret(key string) amqp.Return {
	return amqp.Return{ReplyCode: 312, ReplyText: "NO_ROUTE", Headers: amqp.Table{brokermsg.HeaderKey: key}}
}

// TestLateReturnFromADroppedChannelIsNotTheNextPublishs: replay A of key
// K gave up after its basic.return arrived but before its confirm, and
// its channel was dropped. Replay B of K then goes out on a new channel
// and is confirmed with no return. Replay C, confirmed on the old channel
// just before it closed, drains the old channel's returns, A's among
// them. B must not take A's return: it would report a message the broker
// took as failed, and the ledger would send it again. D, confirmed on the
// old channel with its own return drained by C, must still find it.
// (The timing between a return and its confirm cannot be held open on a
// real broker, so the pipe is driven with the client's Return values.)
func TestLateReturnFromADroppedChannelIsNotTheNextPublishs(t *testing.T) {
	p := newPipe()
	old, cur := make(chan amqp.Return, maxInFlight), make(chan amqp.Return, maxInFlight)
	relA, err := p.claim(context.Background(), "K")
	must(t, err)
	old <- ret("K") // A's return; A gives up, its channel is dropped
	old <- ret("D")
	relA()
	relB, err := p.claim(context.Background(), "K")
	must(t, err)
	defer relB()
	if _, ok := p.returnOf(old, "C"); ok {
		t.Fatal("C took a return that was not its own")
	}
	if r, ok := p.returnOf(cur, "K"); ok {
		t.Errorf("B (new channel, no return) took the old channel's return of its key: %d %s", r.ReplyCode, r.ReplyText)
	}
	if _, ok := p.returnOf(old, "D"); !ok {
		t.Error("D lost its return, drained by C")
	}
}
