package source

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLivePageRedirectCarriesNoKey: a gateway answering a page read with
// 302 to another host is an error naming the status; net/http used to
// follow it with X-API-Key (CORDUM_API_KEY) and read the other host's
// page as the DLQ.
func TestLivePageRedirectCarriesNoKey(t *testing.T) {
	var hits, keyed atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-API-Key") != "" || r.Header.Get("Authorization") != "" {
			keyed.Add(1)
		}
		_, _ = w.Write([]byte(`{"items":[],"next_cursor":null}`))
	}))
	defer other.Close()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer gw.Close()
	for _, kind := range []string{"cordum", "nexora"} {
		s, err := newLiveSource(kind+":"+gw.URL, kind, gw.URL, envOf(map[string]string{"CORDUM_API_KEY": "page-secret-4", "NEXORA_TOKEN": "page-secret-5"}))
		if err != nil {
			t.Fatal(err)
		}
		fastRetry(s)
		_, err = readLive(t, s)
		if err == nil || !strings.Contains(err.Error(), "302") {
			t.Errorf("%s: error %v, want the 302", kind, err)
		}
		if err != nil && strings.Contains(err.Error(), "page-secret") {
			t.Errorf("%s: error carries the key: %v", kind, err)
		}
	}
	if hits.Load() != 0 || keyed.Load() != 0 {
		t.Errorf("the other host got %d page reads, %d with a key", hits.Load(), keyed.Load())
	}
}
