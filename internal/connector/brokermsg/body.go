package brokermsg

import (
	"encoding/base64"
	"errors"
	"unicode/utf8"
)

// Body is a message body inside an entry's payload envelope. A body that
// is valid UTF-8 is kept as a JSON string (readable in `dlq show`, and a
// JSON string gives back exactly its bytes); any other body as base64.
// Either way Bytes returns the bytes the broker held, so a replay sends
// what was read.
type Body struct {
	Text   *string `json:"body,omitempty"`
	Base64 string  `json:"body_base64,omitempty"`
}

// NewBody keeps b.
func NewBody(b []byte) Body {
	if utf8.Valid(b) {
		s := string(b)
		return Body{Text: &s}
	}
	return Body{Base64: base64.StdEncoding.EncodeToString(b)}
}

// ErrNoBody is returned by Bytes for an envelope that holds no body at all
// (a payload written by something else).
var ErrNoBody = errors.New("payload envelope has no body or body_base64")

// Bytes returns the body's bytes.
func (b Body) Bytes() ([]byte, error) {
	switch {
	case b.Text != nil:
		return []byte(*b.Text), nil
	case b.Base64 != "":
		return base64.StdEncoding.DecodeString(b.Base64)
	}
	return nil, ErrNoBody
}

// Bin is a byte string (a Kafka record key or header value) kept the same
// way as a Body: text when it is valid UTF-8, else base64. Nil stays nil.
type Bin struct {
	Text   *string `json:"text,omitempty"`
	Base64 *string `json:"base64,omitempty"`
}

// NewBin keeps b; a nil b gives the zero Bin (no value, as a Kafka null key).
func NewBin(b []byte) Bin {
	if b == nil {
		return Bin{}
	}
	if utf8.Valid(b) {
		s := string(b)
		return Bin{Text: &s}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return Bin{Base64: &s}
}

// Bytes returns the value, nil when there was none.
func (b Bin) Bytes() ([]byte, error) {
	switch {
	case b.Text != nil:
		return []byte(*b.Text), nil
	case b.Base64 != nil:
		return base64.StdEncoding.DecodeString(*b.Base64)
	}
	return nil, nil
}
