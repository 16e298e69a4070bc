package registry

import (
	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/entry"
)

// SourceRef names a decodable entry as its system does, for the console;
// ok is false for a system that has no names of its own (a JSONL export,
// a broker: the console shows where the entry was read from).
func SourceRef(e *entry.Entry) (ref connector.SourceRef, ok bool) {
	switch e.Source {
	case entry.KindCordum, entry.KindCordumRedis:
		return cordum.SourceRef(e), true
	case entry.KindNexora:
		return nexora.SourceRef(e), true
	case entry.KindProdigy:
		return prodigy.SourceRef(e), true
	}
	return connector.SourceRef{}, false
}
