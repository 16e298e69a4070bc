package sqs

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// maxRequestBody bounds a request body copied into memory: an SQS
// request is at most a 256 KiB message (1 MiB with the newer limit) plus
// its JSON; nothing replayctl sends comes near 4 MiB.
const maxRequestBody = 4 << 20

// memBodyClient hands the transport a request body held in memory.
//
// The SDK closes a request's body as soon as Do returns, that is once the
// response's headers have arrived (aws/smithy-go v1.28.9
// transport/http/client.go:116, ClientHandler.Handle). net/http writes a
// body it does not know to be in memory after flushing the headers, and
// after the body's ContentLength bytes it reads once more to check that
// nothing follows (net/http transfer.go, writeBody's nextra). A server
// that answers as soon as it has the bytes (an in-process one, or any
// under load) can have its answer read, and the body closed, before that
// last read: the SDK's closed body then says io.EOF as an error, the
// transport closes the connection while the answer's body is still being
// read, and the SDK retries. A ReceiveMessage whose answer is lost that
// way leaves its messages invisible for the visibility timeout: the
// bench's read ended "read 1990 of 2000" about one run in five; a
// SendMessage so lost was even reported not sent. The transport gets a
// copy of the body, which says io.EOF as an end, not an error. It is not a
// bytes.Reader on purpose: net/http writes such a body with the headers in
// one write, and a send on a kept-alive connection the server has closed
// would then look written in full (an unknown outcome) where the body's
// own write fails today (not sent).
type memBodyClient struct{ c *http.Client }

// bodyCopy hides bytes.Reader's WriteTo and its type from net/http.
type bodyCopy struct{ r *bytes.Reader }

func (b bodyCopy) Read(p []byte) (int, error) { return b.r.Read(p) }

func (m memBodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > maxRequestBody {
			r.Body.Close()
			return nil, fmt.Errorf("request body over %d bytes", maxRequestBody)
		}
		buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
		_, err := buf.ReadFrom(io.LimitReader(r.Body, maxRequestBody+1))
		r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the request body: %w", err)
		}
		b := buf.Bytes()
		if len(b) > maxRequestBody {
			return nil, fmt.Errorf("request body over %d bytes", maxRequestBody)
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bodyCopy{bytes.NewReader(b)})
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bodyCopy{bytes.NewReader(b)}), nil }
		r.ContentLength = int64(len(b))
	}
	return m.c.Do(r)
}
