package server

import (
	"context"
	"net/http"
	"time"
)

// Timeouts bound how long one client may hold a connection. Without them a
// client sending a request body one byte a minute to /login keeps its
// connection (and goroutine) forever. Zero fields take the defaults.
type Timeouts struct {
	// ReadHeader bounds reading the request line and headers.
	ReadHeader time.Duration
	// Read bounds reading the whole request, body included (bodies are at
	// most MaxBody).
	Read time.Duration
	// Write bounds writing the response, from the end of reading the
	// headers; generous because a plan over a large queue is one response.
	Write time.Duration
	// Idle bounds a kept-alive connection waiting for its next request.
	Idle time.Duration
}

// DefaultTimeouts are used for zero fields of Config.Timeouts.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: 5 * time.Minute, Idle: 2 * time.Minute}
}

// DefaultMaxUnauthenticated caps the requests without valid credentials
// handled at once; past it they are answered 503 at once. Authenticated
// requests and the health, readiness and metrics probes never wait on it.
const DefaultMaxUnauthenticated = 64

func (t Timeouts) orDefaults() Timeouts {
	pick := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	d := DefaultTimeouts()
	return Timeouts{ReadHeader: pick(t.ReadHeader, d.ReadHeader), Read: pick(t.Read, d.Read),
		Write: pick(t.Write, d.Write), Idle: pick(t.Idle, d.Idle)}
}

// HTTPServer returns an http.Server for s with its timeouts set; serve
// uses it so that no listener runs without them.
func (s *Server) HTTPServer() *http.Server {
	t := s.cfg.Timeouts.orDefaults()
	return &http.Server{Handler: s, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// limitUnauthenticated serves r through next, holding one of the
// unauthenticated slots while it runs when r carries no valid credentials.
// A flood of slow anonymous requests (a login form posted byte by byte)
// then fills only those slots: the API and the probes keep answering.
func (s *Server) limitUnauthenticated(w http.ResponseWriter, r *http.Request, next http.Handler) {
	switch r.URL.Path {
	case "/healthz", "/metrics":
		// /readyz is not exempt: it may load the configuration (when its
		// files changed), so a flood of it counts like any anonymous load.
		next.ServeHTTP(w, r)
		return
	}
	if tok, ok := s.authenticate(r); ok {
		// Authenticated once per request: the handlers read it back.
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authKey{}, tok)))
		return
	}
	select {
	case s.unauth <- struct{}{}:
		defer func() { <-s.unauth }()
		next.ServeHTTP(w, r)
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "busy", "too many unauthenticated requests in progress; try again shortly")
	}
}
