// Package notify tells approvers that approvals wait for them: one POST per
// run (a batch, not one per entry) to each configured webhook, in a Slack
// compatible payload or a generic JSON one, with a link to the approval
// page. Delivery is in the background with retries and backoff; a failing
// webhook is counted, never blocks or fails a run.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Webhook is one destination.
type Webhook struct {
	URL string
	// Format is "slack" ({"text": ...}) or "json" (the Batch itself).
	Format string
}

// Batch is what one run asks of approvers: the requests it opened or,
// with Reason "aging", the requests that have waited longer than
// OlderThan (Requested counts them; Groups by approver group).
type Batch struct {
	Run       string         `json:"run"`
	Requested int            `json:"approvals_requested"`
	Link      string         `json:"link"`
	Reason    string         `json:"reason,omitempty"`
	OlderThan string         `json:"older_than,omitempty"`
	Groups    map[string]int `json:"groups,omitempty"`
}

// Notifier delivers batches. Failed counts deliveries given up after every
// retry (exported as a metric by its owner).
type Notifier struct {
	Hooks    []Webhook
	Client   *http.Client
	Attempts int           // per delivery, at least 1
	Backoff  time.Duration // before the second attempt, doubling after
	// Sleep waits between attempts (injected so tests need no real clock).
	Sleep  func(context.Context, time.Duration)
	Failed func(hook string)

	wg sync.WaitGroup
}

// Send queues a batch for every webhook and returns at once.
func (n *Notifier) Send(ctx context.Context, b Batch) {
	if n == nil || b.Requested == 0 {
		return
	}
	for _, h := range n.Hooks {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.deliver(ctx, h, b); err != nil && n.Failed != nil {
				n.Failed(h.URL)
			}
		}()
	}
}

// Wait waits for deliveries in progress (at shutdown, and in tests).
func (n *Notifier) Wait() { n.wg.Wait() }

func body(h Webhook, b Batch) ([]byte, error) {
	if h.Format == "slack" && b.Reason == "aging" {
		return json.Marshal(map[string]string{"text": fmt.Sprintf(
			"replayctl: %d approval request(s) have waited longer than %s: <%s|open the approval queue>", b.Requested, b.OlderThan, b.Link)})
	}
	if h.Format == "slack" {
		return json.Marshal(map[string]string{"text": fmt.Sprintf(
			"replayctl run %s: %d approval request(s) wait for you: <%s|open the approval queue>", b.Run, b.Requested, b.Link)})
	}
	return json.Marshal(b)
}

func (n *Notifier) deliver(ctx context.Context, h Webhook, b Batch) error {
	data, err := body(h, b)
	if err != nil {
		return err
	}
	client := n.Client
	if client == nil {
		// A 3xx is a failed delivery, never followed: following it would
		// resend the batch (as a GET without its body) to whatever host the
		// Location names, and its 2xx would look like a delivery.
		client = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	wait := n.Backoff
	var last error
	for attempt := range max(n.Attempts, 1) {
		if attempt > 0 && n.Sleep != nil {
			n.Sleep(ctx, wait)
			wait *= 2
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(data))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode < 300 {
			return nil
		}
		// The host only: a webhook URL's path is often its secret (Slack).
		last = fmt.Errorf("webhook to %s: %s", hostOf(h.URL), resp.Status)
	}
	return last
}

// hostOf is the URL's scheme and host, without the path or query that
// may carry a webhook's secret.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host
}
