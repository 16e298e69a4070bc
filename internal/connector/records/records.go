package records

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/replayctl/replayctl/internal/entry"
)

// MaxRecord caps one record (a line, an array element, an item file). A
// longer one is yielded undecodable rather than buffered.
const MaxRecord = 64 << 20

// Layout says how records are laid out in a file of a given format.
type Layout int

const (
	// LayoutSniffed: one object, a stream of objects, an array of objects or
	// JSON Lines, told apart by the first bytes (a dump of a broker's DLQ).
	LayoutSniffed Layout = iota
	// LayoutList: {"items": [...], ...} or a bare array (a list response
	// saved from a system's API).
	LayoutList
	// LayoutLines: JSON Lines only (jsonl).
	LayoutLines
)

// Format is one file-based source kind: how its records are laid out and how
// one record, already known to be a JSON object, becomes an entry. Decode
// fills in everything but Source, Origin and the derived key, and returns
// an error when the record is not an entry of that kind. A format decoded
// strictly does so through strict, the file's one decoder (nil: a fresh one).
type Format struct {
	Kind   string
	Layout Layout
	Decode DecodeFunc
	// IDFields are the fields holding a record's own id, which names a
	// live record that does not decode (StableID); "id" when empty.
	IDFields []string
}

// DecodeFunc decodes one record of a format.
type DecodeFunc func(raw []byte, e *entry.Entry, strict *StrictDecoder) error

// mode is what sniffing found in a file.
type mode int

const (
	modeEmpty   mode = iota // nothing but white space
	modeLines               // JSON Lines
	modeArray               // [ record, ... ]
	modeObjects             // one or more (multi-line) objects
	modeList                // {"items": [ record, ... ]}
	modeNotList             // a LayoutList file that is neither object nor array
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Reader yields the records of one file, whatever the layout: the
// machinery every file-based kind shares.
type Reader struct {
	Format
	Name string // the file as the user named it; decoded records' Origin
	// Key is the name undecodable records are named (and so keyed) by,
	// in place of Name: the file's canonical path (Canonical), so that
	// ./x.jsonl, x.jsonl, /abs/x.jsonl and a link to it name one record
	// alike. Empty: Name.
	Key     string
	R       io.ReadSeeker
	MaxLine int
	// strict is this file's one streaming decoder for formats decoded
	// strictly (jsonl): a new json.Decoder per line made decoding 1.2x
	// slower than plain encoding/json (issue 16).
	strict StrictDecoder
	// live: the records are a page of a running system's DLQ, where a
	// record's position shifts as entries ahead of it leave. An
	// undecodable one is named by its own id or content (StableID), not by
	// where it was: named by position, one bad record was quarantined
	// again under a new name on every run.
	Live bool
}

// Decoder is the json.Decoder the strict decoding uses now (nil before
// the first record): one per file, made again only after an error.
func (rr *Reader) Decoder() *json.Decoder { return rr.strict.dec }

// Each yields every record of the file in order, an undecodable one as an
// entry with DecodeError set; a read error is yielded once, at the end.
func (rr *Reader) Each(ctx context.Context, yield func(entry.Entry, error) bool) {
	// A small file gets a small buffer: many DLQ files hold a few records.
	size, err := rr.R.Seek(0, io.SeekEnd)
	bufSize := int(min(max(size, 512), 64<<10))
	var start int64
	var m mode
	if err == nil {
		_, err = rr.R.Seek(0, io.SeekStart)
	}
	if err == nil {
		start, m, err = rr.sniff(min(bufSize, 4<<10))
	}
	if err == nil {
		_, err = rr.R.Seek(start, io.SeekStart)
	}
	if err != nil {
		yield(entry.Entry{}, fmt.Errorf("read %s: %w", rr.Name, err))
		return
	}
	br := bufio.NewReaderSize(rr.R, bufSize)
	switch m {
	case modeEmpty:
	case modeLines:
		rr.lines(ctx, br, yield)
	case modeNotList:
		yield(rr.undecodableAt(rr.Name, errors.New(`not a dead-letter list: want {"items": [...]} or a JSON array`)), nil)
	default:
		lc := &lineCounter{r: br, base: start}
		dec := json.NewDecoder(lc)
		switch m {
		case modeArray:
			rr.array(ctx, dec, lc, yield)
		case modeObjects:
			rr.objects(ctx, dec, lc, yield)
		case modeList:
			rr.list(ctx, dec, lc, yield)
		}
	}
}

// sniff decides the mode from the first bytes and returns where records
// start (past a byte order mark).
func (rr *Reader) sniff(bufSize int) (start int64, m mode, err error) {
	br := bufio.NewReaderSize(rr.R, bufSize)
	if b, _ := br.Peek(len(utf8BOM)); bytes.Equal(b, utf8BOM) {
		start = int64(len(utf8BOM))
		br.Discard(len(utf8BOM))
	}
	if rr.Layout == LayoutLines {
		return start, modeLines, nil
	}
	c, err := firstNonSpace(br)
	if err == io.EOF {
		return start, modeEmpty, nil
	}
	if err != nil {
		return 0, 0, err
	}
	switch {
	case c == '[':
		return start, modeArray, nil
	case rr.Layout == LayoutList && c == '{':
		return start, modeList, nil
	case rr.Layout == LayoutList:
		return start, modeNotList, nil
	case c != '{':
		// Not JSON we know: read it as lines, so each is reported.
		return start, modeLines, nil
	}
	br.UnreadByte()
	if listResponse(br) {
		return start, modeList, nil
	}
	m, err = sniffObjects(newLineReader(br, rr.MaxLine))
	return start, m, err
}

// sniffObjects tells JSON Lines from pretty-printed objects. A first line
// that is a complete value means JSON Lines. So does a broken first line
// followed by a complete object: a JSON Lines file whose first record is
// damaged must not be read as one broken object, losing every line after it.
func sniffObjects(lr *lineReader) (mode, error) {
	for i := 0; ; {
		line, tooLong, err := lr.next()
		if err == io.EOF {
			return modeObjects, nil
		}
		if err != nil {
			return 0, err
		}
		if tooLong {
			return modeLines, nil
		}
		line = TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] == '{' && json.Valid(line) {
			return modeLines, nil
		}
		if i++; i == 2 {
			return modeObjects, nil
		}
	}
}

// listResponse reports whether the object at the reader starts with a key
// only a list response has: a gateway's list answers {"items": [...]}, a
// page of it {"items", "next_cursor"} (see the Cordum connector's package
// doc), while a DLQ entry itself never has either key.
// Only the first key is looked at, within what is already buffered.
func listResponse(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	key, err := dec.Token()
	return err == nil && (key == "items" || key == "next_cursor")
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if !isSpace(c) {
			return c, nil
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// lines yields one record per non-blank line, each decoded on its own.
func (rr *Reader) lines(ctx context.Context, br *bufio.Reader, yield func(entry.Entry, error) bool) {
	lr := newLineReader(br, rr.MaxLine)
	for {
		if err := ctx.Err(); err != nil {
			yield(entry.Entry{}, err)
			return
		}
		line, tooLong, err := lr.next()
		if err == io.EOF {
			return
		}
		if err != nil {
			yield(entry.Entry{}, fmt.Errorf("read %s: %w", rr.Name, err))
			return
		}
		where := rr.Name + ":" + strconv.Itoa(lr.line) // once per line: no fmt
		var e entry.Entry
		if tooLong {
			e = rr.undecodableAt(where, fmt.Errorf("line longer than %d bytes", rr.MaxLine))
		} else if line = TrimSpace(line); len(line) == 0 {
			continue
		} else {
			e = rr.record(line, where, "")
		}
		if !yield(e, nil) {
			return
		}
	}
}

// array yields the elements of a JSON array, named name#INDEX (from 0).
func (rr *Reader) array(ctx context.Context, dec *json.Decoder, lc *lineCounter, yield func(entry.Entry, error) bool) {
	if _, err := dec.Token(); err != nil { // the '[' sniff saw
		rr.unreadable(dec, lc, err, "", yield)
		return
	}
	if _, ok := rr.elements(ctx, dec, lc, 0, yield); ok {
		rr.trailing(dec, lc, "the array", yield)
	}
}

// elements yields array elements after the opening bracket up to and
// including the closing one, numbering them from i. It returns the next
// number and whether reading may go on.
func (rr *Reader) elements(ctx context.Context, dec *json.Decoder, lc *lineCounter, i int, yield func(entry.Entry, error) bool) (int, bool) {
	for ; dec.More(); i++ {
		if err := ctx.Err(); err != nil {
			yield(entry.Entry{}, err)
			return i, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return i, rr.unreadable(dec, lc, err, fmt.Sprintf("element #%d", i), yield)
		}
		line := lc.line(dec.InputOffset() - int64(len(raw)))
		e := rr.record(raw, fmt.Sprintf("%s#%d", rr.Name, i), fmt.Sprintf("line %d: ", line))
		if !yield(e, nil) {
			return i, false
		}
	}
	if _, err := dec.Token(); err != nil {
		return i, rr.unreadable(dec, lc, err, "end of array", yield)
	}
	return i, true
}

// trailing reports anything but white space after the top-level value:
// never silently ignore bytes that may hold records.
func (rr *Reader) trailing(dec *json.Decoder, lc *lineCounter, what string, yield func(entry.Entry, error) bool) {
	_, err := dec.Token()
	if err == io.EOF {
		return
	}
	if err == nil {
		err = errors.New("unexpected data after " + what)
	}
	rr.unreadable(dec, lc, err, "", yield)
}

// objects yields a file of one or more concatenated (usually pretty-printed)
// objects. A file holding exactly one is named by its path alone; otherwise
// each is named path:LINE.
func (rr *Reader) objects(ctx context.Context, dec *json.Decoder, lc *lineCounter, yield func(entry.Entry, error) bool) {
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			yield(entry.Entry{}, err)
			return
		}
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return
		}
		if err != nil {
			rr.unreadable(dec, lc, err, "", yield)
			return
		}
		line := lc.line(dec.InputOffset() - int64(len(raw)))
		where := fmt.Sprintf("%s:%d", rr.Name, line)
		if i == 0 && !dec.More() {
			where = rr.Name
		}
		if !yield(rr.record(raw, where, ""), nil) {
			return
		}
	}
}

// list yields the "items" array of a list response; other keys are skipped.
// Elements are numbered across "items" keys should one repeat.
func (rr *Reader) list(ctx context.Context, dec *json.Decoder, lc *lineCounter, yield func(entry.Entry, error) bool) {
	if _, err := dec.Token(); err != nil { // the '{' sniff saw
		rr.unreadable(dec, lc, err, "", yield)
		return
	}
	found, n := false, 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			rr.unreadable(dec, lc, err, "", yield)
			return
		}
		if key != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				rr.unreadable(dec, lc, err, "", yield)
				return
			}
			continue
		}
		found = true
		tok, err := dec.Token()
		if err != nil {
			rr.unreadable(dec, lc, err, `"items"`, yield)
			return
		}
		if tok != json.Delim('[') {
			yield(rr.undecodableAt(rr.Name, fmt.Errorf(`"items" is %s, not an array`, describeToken(tok))), nil)
			return
		}
		var ok bool
		if n, ok = rr.elements(ctx, dec, lc, n, yield); !ok {
			return
		}
	}
	if _, err := dec.Token(); err != nil {
		rr.unreadable(dec, lc, err, "", yield)
		return
	}
	if !found {
		yield(rr.undecodableAt(rr.Name, errors.New(`no "items" array: not a dead-letter list`)), nil)
		return
	}
	rr.trailing(dec, lc, "the list", yield)
}

// unreadable reports a syntax error the decoder cannot get past: one
// undecodable entry naming the line and byte where reading stopped. It is
// not fatal: the records before it were yielded and the caller moves on. A
// read error, though, is fatal. It returns false: reading this file is over.
func (rr *Reader) unreadable(dec *json.Decoder, lc *lineCounter, err error, what string, yield func(entry.Entry, error) bool) bool {
	if lc.err != nil {
		yield(entry.Entry{}, fmt.Errorf("read %s: %w", rr.Name, lc.err))
		return false
	}
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		err = errors.New("the file ends in the middle of a value")
	}
	// The decoder stops before the separator; name where the bad value
	// begins, past white space and a comma it has buffered.
	off := dec.InputOffset()
	for b := dec.Buffered(); ; off++ {
		var c [1]byte
		if n, _ := b.Read(c[:]); n == 0 || !(isSpace(c[0]) || c[0] == ',' || c[0] == ':') {
			break
		}
	}
	line := lc.line(off)
	if what != "" {
		what += " "
	}
	e := rr.undecodableAt(fmt.Sprintf("%s:%d", rr.Name, line),
		fmt.Errorf("rest of file unreadable: %sat line %d (byte %d): %s", what, line, lc.base+off, Describe(err)))
	yield(e, nil)
	return false
}

// record turns one record's bytes into an entry, undecodable when need be.
// prefix is put before a decode error (an array element's line).
func (rr *Reader) record(raw []byte, where, prefix string) entry.Entry {
	var e entry.Entry
	if err := DecodeObject(raw, &e, rr.Decode, &rr.strict); err != nil {
		err = fmt.Errorf("%s%s", prefix, Describe(err))
		if rr.Live {
			return LiveUndecodable(rr.Kind, StableID(raw, rr.idFields()...), where, err)
		}
		return rr.undecodableAt(where, err)
	}
	e.Source = rr.Kind
	e.Origin = where
	e.EnsureKey()
	return e
}

// undecodableAt names the record at where (Name and a suffix: ":LINE",
// "#INDEX") after Key instead of Name.
func (rr *Reader) undecodableAt(where string, err error) entry.Entry {
	if rr.Key != "" && strings.HasPrefix(where, rr.Name) {
		where = rr.Key + where[len(rr.Name):]
	}
	return Undecodable(rr.Kind, where, err)
}

// DecodeObject checks that raw is a JSON object before handing it to decode:
// null, a number or an array would otherwise decode into an empty struct.
func DecodeObject(raw []byte, e *entry.Entry, decode DecodeFunc, strict *StrictDecoder) error {
	raw = TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		if json.Valid(raw) {
			return fmt.Errorf("record is %s, not a JSON object", DescribeValue(raw))
		}
		return decode(raw, e, strict) // let the decoder name the syntax error
	}
	return decode(raw, e, strict)
}

// undecodable is the entry for a record that could not be decoded: it is
// named by where it was and quarantined by triage, never dropped.
func Undecodable(kind, where string, err error) entry.Entry {
	e := entry.Entry{ID: where, Source: kind, Origin: where, DecodeError: err.Error()}
	e.EnsureKey()
	return e
}

// LiveUndecodable is the entry for an undecodable record of a live source
// (Cordum's gateway or Redis, Nexora's server), named by id, a stable name
// (StableID), with where it was read as its Origin. Its idempotency key is
// derived apart from the key the same id gets once the record decodes, so
// that the quarantined record's empty payload is never taken for a second
// payload under the decoded record's key.
func LiveUndecodable(kind, id, where string, err error) entry.Entry {
	return entry.Entry{ID: id, Source: kind, Origin: where, DecodeError: err.Error(),
		IdempotencyKey: entry.DeriveKey(kind, "undecodable/"+id), KeyDerived: true}
}

func (rr *Reader) idFields() []string {
	if len(rr.IDFields) > 0 {
		return rr.IDFields
	}
	return []string{"id"}
}

// StableID names a record that does not decode by what does not move: the
// first of fields that the raw record holds as a non-empty string or a
// number, read even though the record as a whole does not decode; else
// "sha256:" and a hash of its bytes (white space around them trimmed).
func StableID(raw []byte, fields ...string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, f := range fields {
			v := bytes.TrimSpace(m[f])
			var s string
			switch {
			case len(v) == 0:
			case v[0] == '"':
				if json.Unmarshal(v, &s) == nil && s != "" {
					return s
				}
			case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
				return string(v)
			}
		}
	}
	sum := sha256.Sum256(TrimSpace(raw))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

func describeToken(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return "an object"
		}
		return string(tok)
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

func DescribeValue(raw []byte) string {
	switch raw[0] {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}
