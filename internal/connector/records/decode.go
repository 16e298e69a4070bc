package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// Timestamp is an RFC 3339 time that may be absent, null or "".
type Timestamp struct{ time.Time }

func (t *Timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want an RFC 3339 time string, got %s", b)
	}
	if s == "" {
		return nil
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time, got %q", s)
	}
	t.Time = tt
	return nil
}

// present reports whether a raw field was given a value other than null.
func Present(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }

// HandledStatus reports whether a source's own status word says the entry
// was already dealt with.
func HandledStatus(s string) bool {
	return strings.EqualFold(s, "replayed") || strings.EqualFold(s, "resolved")
}

// span returns the earliest and latest of the times that are set.
func Span(ts ...time.Time) (first, last time.Time) {
	for _, t := range ts {
		if t.IsZero() {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if last.IsZero() || t.After(last) {
			last = t
		}
	}
	return first, last
}

// OrBoth fills a missing end of a time span from the other end.
func OrBoth(first, last time.Time) (time.Time, time.Time) {
	if first.IsZero() {
		first = last
	}
	if last.IsZero() {
		last = first
	}
	return first, last
}

func TrimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// describe words a decode error for an operator reading a quarantine list.
func Describe(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "record"
		}
		return fmt.Sprintf("%s: want %s, got a JSON %s", field, jsonKind(te.Type), te.Value)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: the record ends in the middle of a value"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "invalid JSON: " + se.Error()
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	case reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return t.String()
}
