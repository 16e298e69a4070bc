package store

// How both backends hold an entry record: its JSON without the payload
// (bbolt compresses it, PostgreSQL keeps it in a bytea column).

// StoredEntry is an entry record as JSON without its payload. The payload
// is kept apart, byte for byte (encoding/json would compact a RawMessage,
// and a replay must send the payload verbatim: a signature over it must
// still hold); apart, it is also not re-encoded on every status change.
type StoredEntry struct {
	EntryRecord
	// PayloadBytes holds the payload where a backend keeps it inline
	// (older bbolt files did; read for compatibility).
	PayloadBytes []byte `json:"payload_bytes,omitempty"`
}

// EncodeEntry is r as stored, without its payload.
func EncodeEntry(r *EntryRecord) any {
	se := StoredEntry{EntryRecord: *r}
	se.Entry.Payload = nil
	return &se
}

// DecodeEntry is the record se holds, with its payload put back.
func DecodeEntry(se *StoredEntry, payload []byte) *EntryRecord {
	if se == nil {
		return nil
	}
	r := se.EntryRecord
	switch {
	case payload != nil:
		r.Entry.Payload = payload
	case se.PayloadBytes != nil:
		r.Entry.Payload = se.PayloadBytes
	}
	return &r
}
