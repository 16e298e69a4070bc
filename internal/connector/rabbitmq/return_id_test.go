package rabbitmq

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector/brokermsg"
)

// RabbitMQ 3.13.0-3.13.2 and 4.x do not count a dead-lettering in an
// x-death header the publisher sent (rabbitmq/rabbitmq-server issue 11331,
// PR 11339; spring-cloud/spring-cloud-stream PR 3019: "RabbitMQ 4.0 does
// not deal with client side x-* headers ... x-death.count is not
// incremented anymore"). A message replayctl replayed (keeping its
// headers) that fails again can come back with the x-death count it left
// with: it must still be a new entry, not the one it was replayed from.
// The Debian rabbitmq-server the other tests start (3.10) counts it, so
// this builds the deliveries by hand.
func TestAReturnWithTheSameDeathCountIsANewEntry(t *testing.T) {
	c, err := Open("rabbitmq:amqp://127.0.0.1:5672/?queue=orders.dlq")
	if err != nil {
		t.Fatal(err)
	}
	death := []any{amqp.Table{"count": int64(1), "reason": "rejected", "queue": "orders",
		"exchange": "", "routing-keys": []any{"orders"}, "time": time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}}
	first := amqp.Delivery{MessageId: "m-1", Body: []byte(`{"o":1}`), Headers: amqp.Table{"x-death": death}}
	ret1 := amqp.Delivery{MessageId: "m-1", Body: []byte(`{"o":1}`), Headers: amqp.Table{"x-death": death,
		brokermsg.HeaderKey: "replayctl:abc", brokermsg.HeaderCount: "1"}}
	ret2 := amqp.Delivery{MessageId: "m-1", Body: []byte(`{"o":1}`), Headers: amqp.Table{"x-death": death,
		brokermsg.HeaderKey: "replayctl:abc", brokermsg.HeaderCount: int32(2)}}
	seen := map[string]bool{}
	for _, d := range []amqp.Delivery{first, ret1, ret2} {
		id := c.entryOf(&d).ID
		if seen[id] {
			t.Fatalf("id %q twice: a return would be taken for the entry it came from", id)
		}
		seen[id] = true
	}
	if id := c.entryOf(&first).ID; id != "m-1#1" {
		t.Errorf("an unreplayed message's id is %q, want m-1#1 (unchanged)", id)
	}
}
