package connectortest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/entry"
)

// Target builds a connector's replay path for a system whose HTTP API is
// at base, with secret as its credential (an API key, a token, a
// configured header's value).
type Target func(t testing.TB, base, secret string) connector.Dispatcher

// Elsewhere is the host a redirect points at: it counts what reaches it
// and keeps the headers it saw, and answers 200 (which must never count
// as a delivery).
type Elsewhere struct {
	*httptest.Server
	mu      sync.Mutex
	Headers []http.Header
}

// NewElsewhere starts one, closed with the test.
func NewElsewhere(t testing.TB) *Elsewhere {
	e := &Elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.Headers = append(e.Headers, r.Header.Clone())
		e.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(e.Close)
	return e
}

// Hits is how many requests reached it.
func (e *Elsewhere) Hits() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.Headers)
}

// Redirector answers every request with status and a Location on to.
func Redirector(t testing.TB, status int, to string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, to+r.URL.RequestURI(), status)
	}))
	t.Cleanup(s.Close)
	return s
}

// RedirectNeverCommits: a replay answered 301, 302, 303, 307 or 308 is
// neither succeeded nor handled elsewhere nor retried as if sent, and
// nothing (least of all the secret) reaches the host it points at.
func RedirectNeverCommits(t *testing.T, mk Target) {
	const secret = "conformance-secret-3f9"
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run("redirect_"+strconv.Itoa(status), func(t *testing.T) {
			other := NewElsewhere(t)
			d := mk(t, Redirector(t, status, other.URL).URL, secret)
			e := &entry.Entry{ID: "job-1", Source: "conformance", Payload: []byte(`{"a":1}`)}
			res := d.Dispatch(context.Background(), connector.Request{Entry: e, Key: "k-1", Attempt: 1})
			if res.Outcome == connector.Succeeded || res.Outcome == connector.HandledElsewhere || res.SourceUpdated || res.Outcome.Retryable() {
				t.Errorf("outcome %s (%s), want failed: the replay went nowhere", res.Outcome, res.Detail)
			}
			if res.Status != status {
				t.Errorf("status %d, want %d", res.Status, status)
			}
			if n := other.Hits(); n != 0 {
				t.Errorf("the redirect's host got %d requests (headers %v)", n, other.Headers)
			}
			if strings.Contains(res.Detail, secret) {
				t.Errorf("detail carries the secret: %s", res.Detail)
			}
		})
	}
	if _, ok := mk(t, "http://127.0.0.1:1", secret).(connector.EntryProber); ok {
		t.Run("probe_redirect", func(t *testing.T) {
			other := NewElsewhere(t)
			p := mk(t, Redirector(t, http.StatusFound, other.URL).URL, secret).(connector.EntryProber)
			pr, detail := p.ProbeEntry(context.Background(), &entry.Entry{ID: "job-1"})
			if pr != connector.ProbeInconclusive {
				t.Errorf("probe through a redirect: %v (%s)", pr, detail)
			}
			if n := other.Hits(); n != 0 {
				t.Errorf("the redirect's host got %d probe requests", n)
			}
			if strings.Contains(detail, secret) {
				t.Errorf("probe detail carries the secret: %s", detail)
			}
		})
	}
}

// DroppingServer is a raw HTTP/1.1 server: on the first connection it
// answers the first request 200 and keeps the connection alive, then reads
// the second request whole and closes the connection without an answer
// (a gateway that crashed, or an idle timeout racing the request). Every
// request on a later connection is answered 200 {"job_id":"NEW"}.
type DroppingServer struct {
	URL   string
	mu    sync.Mutex
	lines []string // every request read: method and path
}

// NewDroppingServer starts one, closed with the test.
func NewDroppingServer(t testing.TB) *DroppingServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &DroppingServer{URL: "http://" + ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.serve(c, first)
			first = false
		}
	}()
	return g
}

func (g *DroppingServer) serve(c net.Conn, drop bool) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		g.mu.Lock()
		g.lines = append(g.lines, req.Method+" "+req.URL.Path)
		g.mu.Unlock()
		if drop && n == 1 {
			return // read in full, never answered
		}
		body := `{"job_id":"NEW","accepted":true}`
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

// Requests is how many requests it has read.
func (g *DroppingServer) Requests() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lines)
}

// DroppedConnectionNeverResent: a replay the system read on a kept-alive
// connection that then broke reaches the system exactly once and is
// outcome_unknown. net/http resends a body-less request with an
// Idempotency-Key on a new connection by itself, which made two Cordum
// jobs of one replay, recorded succeeded.
func DroppedConnectionNeverResent(t *testing.T, mk Target) {
	g := NewDroppingServer(t)
	d := mk(t, g.URL, "conformance-secret-3f9")
	// The first replay leaves a kept-alive connection behind.
	first := d.Dispatch(context.Background(), connector.Request{Entry: &entry.Entry{ID: "job-1", Payload: []byte(`{}`)}, Key: "k-1", Attempt: 1})
	if first.Outcome != connector.Succeeded {
		t.Fatalf("first replay: %s (%s)", first.Outcome, first.Detail)
	}
	before := g.Requests()
	res := d.Dispatch(context.Background(), connector.Request{Entry: &entry.Entry{ID: "job-2", Payload: []byte(`{}`)}, Key: "k-2", Attempt: 1})
	if n := g.Requests() - before; n != 1 {
		t.Errorf("the system got the replay %d times, want once", n)
	}
	if res.Outcome != connector.Unknown {
		t.Errorf("outcome %s (%s), want outcome_unknown", res.Outcome, res.Detail)
	}
}

// ControlCharacterIDsSent: an entry whose id and key hold ESC, NUL and
// invalid UTF-8 is sent (encoded), never refused before sending on every
// run, which spent no budget and left it pending forever. got is what the
// system saw of the one request.
func ControlCharacterIDsSent(t *testing.T, mk Target) (got *http.Request) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		got = r.Clone(context.Background())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"job_id":"NEW","accepted":true}`))
	}))
	t.Cleanup(srv.Close)
	e := &entry.Entry{ID: "job\x1b[31m\x00\xff%", Source: "conformance", Payload: []byte(`{}`)}
	res := mk(t, srv.URL, "conformance-secret-3f9").Dispatch(context.Background(), connector.Request{Entry: e, Key: "key\x1b\x00", Attempt: 1})
	if res.Outcome != connector.Succeeded || n != 1 {
		t.Fatalf("outcome %s (%s) after %d requests, want succeeded after one", res.Outcome, res.Detail, n)
	}
	if k := got.Header.Get("Idempotency-Key"); k != "key%1B%00" {
		t.Errorf("Idempotency-Key %q, want key%%1B%%00", k)
	}
	return got
}
