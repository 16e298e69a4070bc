package rabbitmq

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// stallProxy forwards TCP to the broker until frozen; frozen, it keeps
// both sockets open and forwards nothing, as a broker does under a
// resource alarm or a hung node: no error, no frame.
type stallProxy struct {
	ln     net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

// stalledReplays freezes px and sends four replays of e through c at
// once, each with its own deadline, keyed prefix-0 to prefix-3. They must
// all end within 20 s: the hangs this catches last ~30 s (the heartbeat),
// and 20 s leaves room for a loaded machine. It returns their results.
func stalledReplays(t *testing.T, c *Conn, px *stallProxy, e *entry.Entry, prefix string, deadline time.Duration, into string) []connector.Result {
	t.Helper()
	px.frozen.Store(true)
	const n = 4
	res := make([]connector.Result, n)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			res[i] = c.Replay(ctx, connector.Request{Entry: e, Key: fmt.Sprintf("%s-%d", prefix, i), Attempt: 1})
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		px.frozen.Store(false)
		<-done
		t.Fatalf("replays with a %s deadline still ran 20s into %s: %+v", deadline, into, res)
	}
	return res
}

// behindStallProxy dead-letters one message (message id id) into b's DLQ
// and puts a stall proxy in front of b's broker; spec reads that DLQ
// through the proxy, with opts (such as "&timeout=1s") after its queue.
func behindStallProxy(t *testing.T, b *bundle, id, opts string) (px *stallProxy, spec string) {
	t.Helper()
	b.publish(amqp.Publishing{MessageId: id, Body: []byte(`{}`)})
	b.rejectAll(1)
	b.waitCount(b.dlq, 1)
	u, err := url.Parse(b.url)
	must(t, err)
	px = newStallProxy(t, u.Host)
	return px, "rabbitmq:" + strings.Replace(strings.TrimSuffix(b.url, "/"), u.Host, px.ln.Addr().String(), 1) +
		"/?queue=" + b.dlq + opts
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &stallProxy{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pipe(in, out)
			go p.pipe(out, in)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *stallProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		for p.frozen.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestStalledBrokerReplaysEndUnknownAtTheirTimeout: the broker stops
// answering with replays in flight on the shared confirm channel. Each
// replay must end by its confirm timeout as outcome unknown (the broker
// may have the message), not hang until the client's heartbeat gives up
// (30s at the 10s heartbeat) behind a channel close that waits for a
// close-ok, and a later replay must go out on a fresh connection.
func TestStalledBrokerReplaysEndUnknownAtTheirTimeout(t *testing.T) {
	b := newBundle(t, nil)
	px, spec := behindStallProxy(t, b, "s1", "&timeout=1s")
	e := readAll(t, b.connection)[0]
	c, err := Open(spec)
	must(t, err)
	if res := c.Replay(context.Background(), connector.Request{Entry: &e, Key: "st-warm", Attempt: 1}); res.Outcome != connector.Succeeded {
		t.Fatalf("replay through the proxy: %v %s", res.Outcome, res.Detail)
	}

	res := stalledReplays(t, c, px, &e, "st", 3*time.Second, "a stall (confirm timeout 1s)")
	unknown := 0
	for i, r := range res {
		switch r.Outcome {
		case connector.Unknown:
			unknown++
		case connector.NotSent:
		default:
			t.Errorf("replay %d into a stalled broker: %v %s", i, r.Outcome, r.Detail)
		}
	}
	if unknown == 0 {
		t.Errorf("no replay into the stalled broker was reported unknown: %+v", res)
	}
	px.frozen.Store(false)
	// The stalled connection is dropped; the next replay dials afresh
	// (through the proxy, thawed) and is confirmed.
	if r := c.Replay(context.Background(), connector.Request{Entry: &e, Key: "st-after", Attempt: 1}); r.Outcome != connector.Succeeded {
		t.Errorf("replay after the stall: %v %s", r.Outcome, r.Detail)
	}
	must(t, c.Close())
}

// TestSilentBrokerDialIsBounded: a listener that accepts the connection
// and never says a word (a load balancer in front of a dead node, a hung
// broker). The connector's own Dial replaced amqp091-go's default one
// and with it the deadline on the AMQP handshake (before heartbeats
// start): a replay waited for the broker's connection.start for ever,
// holding the pipe and the connector's lock. It must end not sent, the
// target down, by its timeout.
func TestSilentBrokerDialIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	c, err := Open("rabbitmq:amqp://guest:guest@" + ln.Addr().String() + "/?queue=q&timeout=300ms")
	must(t, err)
	e := entry.Entry{ID: "silent", Source: Kind, Payload: []byte(`{"body":"{}","replay_queue":"orders"}`)}
	done := make(chan connector.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		done <- c.Replay(ctx, connector.Request{Entry: &e, Key: "silent-1", Attempt: 1})
	}()
	select {
	case r := <-done:
		if r.Outcome != connector.NotSent || !r.TargetDown {
			t.Errorf("replay to a broker that never answers: %v %v %s", r.Outcome, r.TargetDown, r.Detail)
		}
	case <-time.After(20 * time.Second): // unbounded, the handshake waits forever; 20 s leaves room for a loaded machine
		t.Fatal("a replay with a 300ms timeout and a 1s deadline still waited 20s for a broker's handshake")
	}
}

// TestStalledBrokerChannelReopenIsBounded: the pipe's channel is gone but
// its connection is up (a publish error, or a channel exception such as a
// message over the broker's max_message_size, closes only the channel),
// and the broker stops answering. Reopening the channel (channel.open,
// confirm.select) waited for an answer under the pipe's lock with no time
// limit, so the first replay and every one queued behind the lock waited
// for the client's heartbeat to give up (30s at the 10s heartbeat), past
// their own deadlines. Each must end by its deadline, not sent (nothing
// was published), and a replay after the stall must go out.
func TestStalledBrokerChannelReopenIsBounded(t *testing.T) {
	b := newBundle(t, nil)
	px, spec := behindStallProxy(t, b, "r1", "&timeout=1s")
	e := readAll(t, b.connection)[0]
	c, err := Open(spec)
	must(t, err)
	if res := c.Replay(context.Background(), connector.Request{Entry: &e, Key: "ro-warm", Attempt: 1}); res.Outcome != connector.Succeeded {
		t.Fatalf("replay through the proxy: %v %s", res.Outcome, res.Detail)
	}
	// The channel closes; the connection stays.
	c.pipe.mu.Lock()
	ch := c.pipe.ch
	c.pipe.mu.Unlock()
	must(t, ch.Close())

	res := stalledReplays(t, c, px, &e, "ro", 2*time.Second, "a stalled channel reopen")
	for i, r := range res {
		if r.Outcome != connector.NotSent {
			t.Errorf("replay %d that never published: %v %s", i, r.Outcome, r.Detail)
		}
	}
	px.frozen.Store(false)
	if r := c.Replay(context.Background(), connector.Request{Entry: &e, Key: "ro-after", Attempt: 1}); r.Outcome != connector.Succeeded {
		t.Errorf("replay after the stall: %v %s", r.Outcome, r.Detail)
	}
	if got := b.count(b.work); got != 2 {
		t.Errorf("the work queue holds %d replays, want 2 (warm-up and after): a replay not sent was published", got)
	}
	must(t, c.Close())
}

// TestStalledPublisherDialHoldsNoReader: the publishers' connection is
// dialled when a replay needs it. It was dialled under the connector's
// main lock, which the read (each delivery it holds) and every Settle
// take, so a broker that accepts the TCP connection and stalls the AMQP
// handshake held them all until the handshake deadline (the spec's
// timeout, 30s by default), after the replay itself had given up. A
// Settle must not wait for that dial.
func TestStalledPublisherDialHoldsNoReader(t *testing.T) {
	b := newBundle(t, nil)
	px, spec := behindStallProxy(t, b, "d1", "&timeout=10s&wait=500ms")
	c, err := Open(spec)
	must(t, err)
	e := readAll(t, c)[0] // the reader's connection, through the proxy
	px.frozen.Store(true)
	defer px.frozen.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	r := c.Replay(ctx, connector.Request{Entry: &e, Key: "dial-1", Attempt: 1})
	cancel()
	if r.Outcome != connector.NotSent {
		t.Fatalf("replay whose connection never opened: %v %s", r.Outcome, r.Detail)
	}
	c.pipe.mu.Lock()
	op := c.pipe.opening
	c.pipe.mu.Unlock()
	if op == nil {
		t.Fatal("the publisher's dial ended inside the replay's 500ms deadline: the stall did not take")
	}
	other := e
	other.ID = "not-held"
	settled := make(chan error, 1)
	go func() { settled <- c.Settle(context.Background(), &other, connector.Settlement{}) }()
	select {
	case err := <-settled:
		must(t, err)
	case <-op.done:
		t.Fatal("Settle waited for the publishers' stalled dial to give up")
	}
	px.frozen.Store(false)
	<-op.done
	must(t, c.Close())
}
