package jsonl

// Source kinds this connector owns: the KIND of --source KIND:PATH and
// the Source of the entries it yields.
const (
	// Kind is the source kind of replayctl"s own JSON Lines export.
	Kind = "jsonl"
)
