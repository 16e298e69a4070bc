package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/replayctl/replayctl/internal/audit"
)

// remoteFlags point a command at a running `replayctl serve` instead of
// the state file (bbolt allows one process per file).
type remoteFlags struct {
	url, token string
}

func (f *remoteFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "server", os.Getenv("REPLAYCTL_SERVER"), "URL of a running replayctl serve to use instead of --db (or REPLAYCTL_SERVER)")
	fs.StringVar(&f.token, "token", os.Getenv("REPLAYCTL_TOKEN"), "API token for --server (or REPLAYCTL_TOKEN)")
}

func (f *remoteFlags) enabled() bool { return f.url != "" }

// apiError is the server's JSON error.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one API request and decodes the JSON answer into out.
func (f *remoteFlags) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	// A list the server pages (an array answer with X-Next-Cursor) is
	// read whole, page after page: `approvals list --server` must not
	// stop at the first 1000.
	if ov := reflect.ValueOf(out); method == "GET" && ov.Kind() == reflect.Pointer && ov.Elem().Kind() == reflect.Slice {
		all := ov.Elem()
		return f.callPages(ctx, path, q, func(data []byte) error {
			page := reflect.New(all.Type())
			if err := json.Unmarshal(data, page.Interface()); err != nil {
				return err
			}
			all.Set(reflect.AppendSlice(all, page.Elem()))
			return nil
		})
	}
	resp, err := f.send(ctx, &http.Client{Timeout: 5 * time.Minute}, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// callPages GETs every page of a list the server pages (its
// X-Next-Cursor header names the next), calling page with each body.
func (f *remoteFlags) callPages(ctx context.Context, path string, q url.Values, page func(data []byte) error) error {
	q = maps.Clone(q)
	if q == nil {
		q = url.Values{}
	}
	for {
		resp, err := f.send(ctx, &http.Client{Timeout: 5 * time.Minute}, "GET", path, q, nil)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		if err := page(data); err != nil {
			return err
		}
		next := resp.Header.Get("X-Next-Cursor")
		if next == "" || next == q.Get("cursor") {
			return nil
		}
		q.Set("cursor", next)
	}
}

// stream sends one GET and copies a successful answer to w as it arrives
// (an export can be large: no timeout on the whole answer).
func (f *remoteFlags) stream(ctx context.Context, path string, w io.Writer) error {
	resp, err := f.send(ctx, &http.Client{}, "GET", path, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("server %s: answer cut short (run audit verify): %w", f.url, err)
	}
	// Read after the body: the server's verdict on what it streamed.
	if msg := resp.Trailer.Get(audit.ExportErrorTrailer); msg != "" {
		return fmt.Errorf("server %s: %s", f.url, msg)
	}
	return nil
}

// send sends one API request and returns a successful answer for the
// caller to read. A refused one is an error that keeps the exit codes of
// local mode: not found and bad or unprocessable requests are usage errors
// (2), refusals and conflicts are errors (1).
func (f *remoteFlags) send(ctx context.Context, client *http.Client, method, path string, q url.Values, body any) (*http.Response, error) {
	u := strings.TrimRight(f.url, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, usageError("--server %q: %v", f.url, err)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", f.url, err)
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	code := exitError
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = exitUsage
	}
	return nil, &exitErr{code: code, err: f.answerError(resp.StatusCode, data)}
}

// answerError is the error of a refused request. The server's own message
// is printed as the local command prints it (the story suite runs every
// story both ways and expects the same words); anything else, a proxy's
// error page say, names the server and the status.
func (f *remoteFlags) answerError(status int, data []byte) error {
	var ae apiError
	if json.Unmarshal(data, &ae) == nil && ae.Error.Message != "" {
		return errors.New(ae.Error.Message)
	}
	return fmt.Errorf("server %s answered HTTP %d: %s", f.url, status, strings.TrimSpace(string(data)))
}
