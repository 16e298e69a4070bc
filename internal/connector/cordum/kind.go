package cordum

// Source kinds this connector owns: the KIND of --source KIND:PATH and
// the Source of the entries it yields.
const (
	// Kind is the source kind of a Cordum DLQ: a dump, the gateway, and --target cordum:URL.
	Kind = "cordum"
	// KindRedis is the source kind of Cordum"s DLQ read from its Redis.
	KindRedis = "cordum-redis"
)
