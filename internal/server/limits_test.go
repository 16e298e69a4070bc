package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowLogin opens a connection that posts /login's headers and then
// withholds the body, as a slowloris client does. It returns once the
// server has started the handler: with Expect: 100-continue the server
// answers "100 Continue" when the handler first reads the body.
func slowLogin(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, "POST /login HTTP/1.1\r\nHost: x\r\nCookie: "+loginCookie+"=abc\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, "100 Continue") {
		t.Fatalf("want 100 Continue, got %q %v", status, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line after it
		t.Fatal(err)
	}
	return c, br
}

// Issue 14: anonymous requests were not capped, so slow /login bodies could
// hold any number of connections and goroutines.
func TestUnauthenticatedRequestsAreCapped(t *testing.T) {
	b := newAPIBundle(t, []string{line("h1", "timeout", "")}, func(c *Config) { c.MaxUnauthenticated = 2 })
	addr := b.http.Listener.Addr().String()
	first, firstR := slowLogin(t, addr)
	slowLogin(t, addr)

	code, body := b.do("POST", "/login", "", "csrf=x")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "unauthenticated") {
		t.Fatalf("third anonymous request: %d %s, want 503", code, body)
	}
	// Credentials and probes never wait on the anonymous slots.
	if code, body := b.do("GET", "/api/stats", "viewer", ""); code != 200 {
		t.Fatalf("an authenticated request while the slots are full: %d %s", code, body)
	}
	if code, body := b.do("GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz while the slots are full: %d %s", code, body)
	}

	// One slow client finishes; its slot is free again by the time its
	// response has been read (the slot is released before the response is
	// flushed).
	if _, err := io.WriteString(first, "csrf=zz&"+strings.Repeat("x", 92)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(firstR, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the slow login: %d, want 403 (csrf mismatch)", resp.StatusCode)
	}
	if code, body := b.do("POST", "/login", "", "csrf=x"); code != http.StatusForbidden {
		t.Fatalf("anonymous request after a slot was freed: %d %s, want 403", code, body)
	}
}

// Issue 14: serve set only a header timeout, so a body sent slowly held its
// connection for ever. Here the read timeout is short and the server must
// close the connection on its own; the deadline on the test's read is only a
// guard against hanging.
func TestSlowBodyConnectionIsClosed(t *testing.T) {
	def := (&Server{}).HTTPServer()
	if def.ReadHeaderTimeout <= 0 || def.ReadTimeout <= 0 || def.WriteTimeout <= 0 || def.IdleTimeout <= 0 {
		t.Fatalf("HTTPServer without every timeout: %+v", def)
	}
	b := newAPIBundle(t, []string{line("h1", "timeout", "")}, func(c *Config) {
		c.Timeouts = Timeouts{Read: 200 * time.Millisecond}
	})
	c, br := slowLogin(t, b.http.Listener.Addr().String())
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a connection whose body never came")
	}
}
