package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Every list the API serves is a page: a viewer's GET /api/audit over 100k
// records took serve to 1.34 GB (a 180 MB body), three at once to 3.2 GB,
// and /api/plan, /api/approvals and /api/dead-letters?size=10000000 were
// as unbounded (issue 29). A page holds at most MaxPageSize items; the
// NextCursorHeader of a page that is not the last says where the next one
// starts (?cursor=), and the body keeps its shape for existing clients.
const (
	MaxPageSize      = 1000
	NextCursorHeader = "X-Next-Cursor"
	// DefaultMaxHeavy bounds the heavy requests (lists, plan, exports,
	// verifications) served at once; past it they get 429.
	DefaultMaxHeavy = 4
)

// pageSize reads ?size=, capped at MaxPageSize (0 or absent: def).
func pageSize(r *http.Request, def int) (int, error) {
	n, err := intParam(r, "size", def)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		n = def
	}
	return min(n, MaxPageSize), nil
}

// offsetCursor reads a cursor that counts the items already served.
func offsetCursor(r *http.Request) (int, error) {
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(c)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: cursor %q is not one this server gave", errBadRequest, c)
	}
	return n, nil
}

// errPageFull stops a walk once a page is full.
var errPageFull = errors.New("page full")

// heavy serves h holding one of the heavy-request slots: each such request
// reads the whole store or the sources, so a handful at once is what the
// process affords; the next gets 429 with Retry-After at once instead of
// queueing (the client backs off, nothing piles up in memory).
func (s *Server) heavy(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.heavySlots <- struct{}{}:
			defer func() { <-s.heavySlots }()
			h(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("%d heavy requests (lists, plans, exports, verifications) are in progress; try again shortly", cap(s.heavySlots)))
		}
	}
}
