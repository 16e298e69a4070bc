package registry

import (
	"sort"

	"github.com/replayctl/replayctl/internal/connector"
	"github.com/replayctl/replayctl/internal/connector/cordum"
	"github.com/replayctl/replayctl/internal/connector/kafka"
	"github.com/replayctl/replayctl/internal/connector/nexora"
	"github.com/replayctl/replayctl/internal/connector/prodigy"
	"github.com/replayctl/replayctl/internal/connector/rabbitmq"
	"github.com/replayctl/replayctl/internal/connector/sqs"
)

// Codes lists the reason codes every connector writes, sorted by code,
// class and place so that the taxonomy built from them never depends on
// the order connectors are listed in. A JSONL export writes whatever its
// producer wrote: it lists none. internal/policy merges them into the
// triage taxonomy (triage names no system and imports no connector).
func Codes() []connector.Code {
	var all []connector.Code
	for _, cs := range [][]connector.Code{
		cordum.Codes(),
		nexora.Codes(),
		prodigy.Codes(),
		(*rabbitmq.Conn)(nil).Codes(),
		(*kafka.Conn)(nil).Codes(),
		(*sqs.Conn)(nil).Codes(),
	} {
		all = append(all, cs...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		return a.Where < b.Where
	})
	return all
}
