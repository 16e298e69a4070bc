package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The browser tests share one Chromium (packageBrowser): each test's tab
// must still start as a fresh browser's did, without the cookies or
// storage another test left, and at the 1280x900 window every test was
// written against.
func TestBrowserTabsShareNoState(t *testing.T) {
	chromium := requireChromium(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>t</title>"))
	}))
	t.Cleanup(site.Close)

	first := &browserTab{t: t, ctx: startBrowser(t, chromium, 30*time.Second)}
	first.navigate(site.URL)
	first.eval(`document.cookie = "session=first; path=/"; localStorage.setItem("k", "first"); "set"`)
	if got := first.eval(`document.cookie + "|" + localStorage.getItem("k")`); got != "session=first|first" {
		t.Fatalf("the first tab kept %q", got)
	}

	second := &browserTab{t: t, ctx: startBrowser(t, chromium, 30*time.Second)}
	second.navigate(site.URL)
	if got := second.eval(`document.cookie + "|" + localStorage.getItem("k")`); got != "|null" {
		t.Fatalf("a new tab sees the other tab's state: %q", got)
	}
	if got := second.eval(`innerWidth + "x" + outerHeight`); got != "1280x900" {
		t.Fatalf("a new tab's window is %s, want 1280x900", got)
	}
}
