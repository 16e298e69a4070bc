package records

import (
	"encoding/json"
	"errors"
	"io"
)

// StrictDecoder decodes one record after another, rejecting unknown
// fields, through a single json.Decoder for a whole file: the decoder and
// its buffer are made once, not once per line. Records are handed to it
// one at a time (a line, an array element) rather than letting it read the
// file itself, so that a bad record costs only that record: after any
// error the decoder, whose error is sticky, is dropped and the next record
// gets a new one. The zero value and a nil pointer are ready to use.
type StrictDecoder struct {
	feed recordFeed
	dec  *json.Decoder
}

// recordFeed is the decoder's reader: the current record, then io.EOF.
type recordFeed struct{ b []byte }

func (f *recordFeed) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// ErrTrailingData: something other than white space follows the record.
var ErrTrailingData = errors.New("unexpected data after the record")

// Decode decodes exactly one JSON value from raw into v. Anything but
// white space after the value is an error, as is an incomplete value
// (io.ErrUnexpectedEOF).
func (s *StrictDecoder) Decode(raw []byte, v any) error {
	if s == nil {
		s = new(StrictDecoder)
	}
	if s.dec == nil {
		s.dec = json.NewDecoder(&s.feed)
		s.dec.DisallowUnknownFields()
	}
	s.feed.b = raw
	start := s.dec.InputOffset()
	err := s.dec.Decode(v)
	if n := s.dec.InputOffset() - start; err == nil && n < int64(len(raw)) {
		// The decoder has buffered the rest of raw, which must be blank;
		// even blank, it would shift the next record's offsets, so the
		// decoder is not kept.
		s.dec = nil
		if len(TrimSpace(raw[n:])) > 0 {
			err = ErrTrailingData
		}
	}
	if err != nil {
		s.dec = nil
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	}
	return err
}
