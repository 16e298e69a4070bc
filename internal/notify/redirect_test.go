package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A webhook that answers 302 is a failed delivery: the batch never goes to
// the host the Location names (net/http's default client followed it as a
// GET, and the other host's 200 counted as delivered), and the error names
// the host only, never the webhook's secret path.
func TestWebhookRedirectIsNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
	}))
	defer other.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/collect", http.StatusFound)
	}))
	defer hook.Close()
	n := &Notifier{}
	err := n.deliver(context.Background(), Webhook{URL: hook.URL + "/services/T000/SECRETPATH"}, Batch{Requested: 1})
	if err == nil {
		t.Fatal("a 302 was taken as delivered")
	}
	if strings.Contains(err.Error(), "SECRETPATH") {
		t.Errorf("the error shows the webhook's path: %v", err)
	}
	if got := elsewhere.Load(); got != 0 {
		t.Errorf("the other host got %d request(s)", got)
	}
}
