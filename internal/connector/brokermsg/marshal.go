package brokermsg

import "github.com/replayctl/replayctl/internal/jsonenc"

// AppendMarshalString appends s as encoding/json's Marshal writes a
// string, byte for byte: besides what AppendString escapes, '<', '>' and
// '&' as \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and
// \u2029, and \b and \f in their short forms. An envelope that was
// json.Marshal's output keeps its bytes when an appender replaces the
// Marshal: a message read again must give the same payload, since the
// ledger tells a changed payload by its hash. FuzzAppendMarshalString
// holds it to json.Marshal.
func AppendMarshalString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }
