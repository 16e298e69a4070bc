package main

import (
	"fmt"
	"strings"

	"github.com/replayctl/replayctl/internal/replay"
)

// targetURL is a --target value: an http(s) URL, or cordum:URL / nexora:URL
// to replay through that system's own endpoint.
type targetURL struct{ s *string }

func (u targetURL) String() string {
	if u.s == nil {
		return ""
	}
	return *u.s
}

func (u targetURL) Set(v string) error {
	if kind, _, ok := strings.Cut(v, ":"); ok && (kind == "cordum" || kind == "nexora") {
		if _, err := replay.ParseTarget(v, "", replay.Credentials{}); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		*u.s = v
		return nil
	}
	return httpURL(u).Set(v)
}

func (targetURL) Type() string { return "URL" }
