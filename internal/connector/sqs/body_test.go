package sqs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// sdkBody is a request body as the SDK hands one to net/http (aws/smithy-go
// v1.28.9 transport/http/internal/io/safe.go: a WriterTo that says io.EOF
// once closed), made to lose the race deterministically: after its bytes
// are read, a WriteTo (net/http's check that nothing follows
// ContentLength) waits until the caller has closed it, as the SDK does
// once the answer's headers are in.
type sdkBody struct {
	r      *strings.Reader
	closed chan struct{}
	once   sync.Once
}

func (b *sdkBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *sdkBody) WriteTo(w io.Writer) (int64, error) {
	<-b.closed
	return 0, io.EOF
}

func (b *sdkBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// doLikeTheSDK sends a request as smithy-go's ClientHandler does: Do,
// close the request body, then read the answer.
func doLikeTheSDK(t *testing.T, c interface {
	Do(*http.Request) (*http.Response, error)
}, url string) (string, error) {
	t.Helper()
	const in = `{"QueueUrl":"q","MaxNumberOfMessages":10}`
	body := &sdkBody{r: strings.NewReader(in), closed: make(chan struct{})}
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(in))
	resp, err := c.Do(req)
	body.Close()
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestAnswerSurvivesTheSDKClosingTheRequestBody: the server answers once
// it has the request, in two writes (headers, then a body the client has
// not read yet when the SDK closes the request body). Through a plain
// http.Client the transport's last read of the closed body fails, it
// closes the connection, and the answer is lost (a ReceiveMessage's
// messages stay invisible); memBodyClient's answer arrives whole.
func TestAnswerSurvivesTheSDKClosingTheRequestBody(t *testing.T) {
	answer := strings.Repeat(`{"Messages":[]}`, 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength)); err != nil {
			t.Error(err)
		}
		w.(http.Flusher).Flush() // the headers: the client's Do returns
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	for i := range 50 {
		tr := &http.Transport{}
		got, err := doLikeTheSDK(t, memBodyClient{&http.Client{Transport: tr}}, srv.URL)
		tr.CloseIdleConnections()
		if err != nil || got != answer {
			t.Fatalf("request %d: the answer was lost (%d of %d bytes): %v", i, len(got), len(answer), err)
		}
	}
}

// TestLostReceiveAnswerIsTold: a ReceiveMessage performed whose answer
// never arrives leaves its messages invisible for the visibility timeout
// (the SDK retries and gets the next ones). The read cannot take them,
// and its notes say so: how many the queue held, how many were read and
// how many are in flight, not just "read 15".
func TestLostReceiveAnswerIsTold(t *testing.T) {
	b := newBundle(t, false)
	ctx := context.Background()
	for i := range 25 {
		body := fmt.Sprintf(`{"o":%d}`, i)
		if _, err := b.app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(b.srv.URLOf(b.dlq)), MessageBody: &body}); err != nil {
			t.Fatal(err)
		}
	}
	var lost atomic.Int32
	b.srv.LoseAnswer = func(op string) bool { return op == "ReceiveMessage" && lost.Add(1) == 1 }
	got := readAll(t, b.conn)
	if len(got) != 15 {
		t.Fatalf("read %d, want 15 (10 lost with the first answer)", len(got))
	}
	notes := strings.Join(b.conn.Notes(), "\n")
	if !strings.Contains(notes, "read 15 of about 25: about 10 more are in flight") {
		t.Fatalf("notes do not tell of the 10 in flight:\n%s", notes)
	}
	// Once their visibility timeout ends, a later run reads them.
	b.srv.ExpireVisibility(b.dlq)
	b.srv.LoseAnswer = nil
	later, err := Open("sqs:" + b.srv.URLOf(b.dlq) + "?wait=0s")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, later)); n != 25 {
		t.Fatalf("the later run read %d, want all 25 (none deleted)", n)
	}
}

// TestReceiveAheadStopsAtTheEnd: the read receives one answer ahead of
// the caller, and asks for the next only after an answer brought a new
// message, so the empty answer that ends it is the last receive: no
// receive is in flight whose messages the read would leave unread and
// invisible.
func TestReceiveAheadStopsAtTheEnd(t *testing.T) {
	b := newBundle(t, false)
	ctx := context.Background()
	for i := range 35 {
		body := fmt.Sprintf(`{"o":%d}`, i)
		if _, err := b.app.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(b.srv.URLOf(b.dlq)), MessageBody: &body}); err != nil {
			t.Fatal(err)
		}
	}
	got := readAll(t, b.conn)
	ids := map[string]bool{}
	for _, e := range got {
		ids[e.ID] = true
	}
	if len(got) != 35 || len(ids) != 35 {
		t.Fatalf("read %d entries, %d distinct, want 35", len(got), len(ids))
	}
	// 4 answers with messages (10, 10, 10, 5) and the empty one.
	if n := b.srv.Calls("ReceiveMessage"); n != 5 {
		t.Fatalf("%d receives, want 5", n)
	}
	if n := len(b.srv.Messages(b.dlq)); n != 35 {
		t.Fatalf("the queue holds %d, want 35: nothing is deleted before it is stored", n)
	}
}
