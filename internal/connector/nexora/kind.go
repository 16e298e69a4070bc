package nexora

// Source kinds this connector owns: the KIND of --source KIND:PATH and
// the Source of the entries it yields.
const (
	// Kind is the source kind of a Nexora DLQ: an export or the observability server, and --target nexora:URL.
	Kind = "nexora"
)
