package prodigy

// Source kinds this connector owns: the KIND of --source KIND:PATH and
// the Source of the entries it yields.
const (
	// Kind is the source kind of a Prodigy DLQ directory.
	Kind = "prodigy"
)
