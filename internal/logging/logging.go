// Package logging builds replayctl's log/slog logger from --log-format and
// --log-level, so every command logs the same way and a log pipeline can
// parse JSON lines.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Formats and Levels are the accepted flag values, for help and errors.
const (
	Formats = "text or json"
	Levels  = "debug, info, warn or error"
)

// New returns a logger writing to w. An unknown format or level is an
// error saying which values are accepted.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info", "":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, fmt.Errorf("unknown log level %q (want %s)", level, Levels)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("unknown log format %q (want %s)", format, Formats)
}
