package audit

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// An archive is what `store prune` moves out of the live store: a gzip
// compressed JSONL file whose lines are, in order,
//
//	{"type":"header",...}        format version, the segment's first record and the hash before it
//	{"type":"audit","seq","prev","hash","record"}   each record of the segment, as audit export writes it
//	{"type":"entry","entry":{...}}                  each pruned entry record, payload included
//	{"type":"ledger","ledger":{...}}                the ledger record of each pruned entry's key
//	{"type":"approval","approval":{...}}            each pruned approval request
//	{"type":"trailer",...}       the checkpoint at the segment's last record, signed, and the counts
//
// A file without its trailer is incomplete (a prune killed while writing
// it never deletes anything). The records' hashes chain from the header's
// prev to the trailer's checkpoint, which is the live chain's base, so
// archives and the live chain verify end to end.

// ArchiveVersion is the archive format's version.
const ArchiveVersion = 1

// Line types of an archive.
const (
	LineHeader   = "header"
	LineAudit    = "audit"
	LineEntry    = "entry"
	LineLedger   = "ledger"
	LineApproval = "approval"
	LineTrailer  = "trailer"
)

// ArchiveLine is one line of an archive. Entries, ledger records and
// approvals are kept as the store encodes them (RawMessage): this package
// does not own their types.
type ArchiveLine struct {
	Type string `json:"type"`

	// header
	Version int       `json:"version,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Before  time.Time `json:"before,omitzero"`
	// FromSeq is the segment's first record (0: no audit records); Prev
	// the hash before it (Genesis, or the base of an earlier prune).
	FromSeq uint64 `json:"from_seq,omitempty"`
	Prev    string `json:"prev,omitempty"`

	// audit
	Seq    uint64          `json:"seq,omitempty"`
	Hash   string          `json:"hash,omitempty"`
	Record json.RawMessage `json:"record,omitempty"`

	Entry    json.RawMessage `json:"entry,omitempty"`
	Ledger   json.RawMessage `json:"ledger,omitempty"`
	Approval json.RawMessage `json:"approval,omitempty"`

	// trailer: Base is the checkpoint at the segment's last record (with
	// BaseMAC when a key was given); Counts what the file holds.
	Base   *Checkpoint    `json:"base,omitempty"`
	Counts map[string]int `json:"counts,omitempty"`
}

// ArchiveWriter writes an archive's lines through gzip.
type ArchiveWriter struct {
	gz  *gzip.Writer
	buf *bufio.Writer
	enc *json.Encoder
}

// NewArchiveWriter writes to w; Close flushes (it does not close w).
func NewArchiveWriter(w io.Writer) *ArchiveWriter {
	buf := bufio.NewWriterSize(w, 256<<10)
	gz := gzip.NewWriter(buf)
	enc := json.NewEncoder(gz)
	enc.SetEscapeHTML(false)
	return &ArchiveWriter{gz: gz, buf: buf, enc: enc}
}

// Write adds one line.
func (a *ArchiveWriter) Write(l *ArchiveLine) error { return a.enc.Encode(l) }

// Close ends the gzip stream and flushes.
func (a *ArchiveWriter) Close() error {
	if err := a.gz.Close(); err != nil {
		return err
	}
	return a.buf.Flush()
}

// ErrArchiveIncomplete: an archive ends before its trailer.
var ErrArchiveIncomplete = errors.New("archive is incomplete (no trailer): it was not finished, and nothing it lists was removed")

// ReadArchive calls fn with every line of an archive, in order, and
// checks that it ends with its trailer. Lines are bounded (64 MiB, an
// entry's payload with room to spare).
func ReadArchive(r io.Reader, fn func(*ArchiveLine) error) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	defer gz.Close()
	sc := bufio.NewScanner(gz)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	n, trailer := 0, false
	for sc.Scan() {
		n++
		var l ArchiveLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("archive line %d: %w", n, err)
		}
		switch {
		case n == 1 && (l.Type != LineHeader || l.Version != ArchiveVersion):
			return fmt.Errorf("archive line 1: not an archive header of version %d", ArchiveVersion)
		case trailer:
			return fmt.Errorf("archive line %d: a line after the trailer", n)
		}
		trailer = l.Type == LineTrailer
		if err := fn(&l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if !trailer {
		return ErrArchiveIncomplete
	}
	return nil
}

// VerifyArchived verifies a chain pruned into archives end to end: each
// archive's segment from the genesis (or the previous archive's base) to
// its own signed base, then the live chain from the last base on. The
// archives are given oldest first. A gap, an overlap or a changed record
// is a break; with a key every base's signature must hold.
func VerifyArchived(ctx context.Context, archives []io.Reader, live Chain, o VerifyOptions) (*VerifyResult, error) {
	v := NewVerifier()
	res := &VerifyResult{}
	for i, ar := range archives {
		var base *Checkpoint
		err := ReadArchive(ar, func(l *ArchiveLine) error {
			switch l.Type {
			case LineHeader:
				if l.FromSeq != 0 && (l.FromSeq != uint64(v.Count())+1 || l.Prev != v.Head()) {
					res.Break = &Break{Seq: l.FromSeq, Reason: fmt.Sprintf("archive %d starts at record %d after %s, but the chain before it ends at record %d with %s: an archive is missing or out of order",
						i+1, l.FromSeq, l.Prev, v.Count(), v.Head())}
					return errStop
				}
			case LineAudit:
				if b := v.Next(l.Seq, Sealed{Seq: l.Seq, Prev: l.Prev, Hash: l.Hash, Body: l.Record}); b != nil {
					b.Reason = fmt.Sprintf("archive %d: %s", i+1, b.Reason)
					res.Break = b
					return errStop
				}
			case LineTrailer:
				base = l.Base
			}
			return nil
		})
		if errors.Is(err, errStop) {
			res.Records, res.Head = v.Count(), v.Head()
			return res, nil
		}
		if err != nil {
			return nil, fmt.Errorf("archive %d: %w", i+1, err)
		}
		if base == nil || base.Seq != uint64(v.Count()) || base.Head != v.Head() {
			res.Break = &Break{Seq: uint64(v.Count()), Reason: fmt.Sprintf("archive %d: its base does not match its last record", i+1)}
			res.Records, res.Head = v.Count(), v.Head()
			return res, nil
		}
		if len(o.Key) > 0 && !hmac.Equal([]byte(base.MAC), []byte(BaseMAC(o.Key, base.Seq, base.Head))) {
			res.Break = &Break{Seq: base.Seq, Reason: fmt.Sprintf("archive %d: its base is not signed with this key", i+1)}
			res.Records, res.Head = v.Count(), v.Head()
			return res, nil
		}
	}
	// The live chain goes on from the last archive's base: its own base
	// must be that one (or an earlier one still held by a later archive
	// is a gap, which the walk reports).
	from := uint64(v.Count()) + 1
	lb, err := live.AuditBase(ctx)
	if err != nil {
		return nil, err
	}
	if lb != nil && (lb.Seq > uint64(v.Count()) || lb.Seq == uint64(v.Count()) && lb.Head != v.Head()) {
		res.Break = &Break{Seq: lb.Seq, Reason: fmt.Sprintf("the live chain starts after record %d, but the archives end at record %d: an archive is missing", lb.Seq, v.Count())}
		res.Records, res.Head = v.Count(), v.Head()
		return res, nil
	}
	out, err := verifyFrom(ctx, live, o, v, from)
	if out != nil {
		out.From = 1
	}
	return out, err
}
