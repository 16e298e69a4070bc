package source

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/replayctl/replayctl/internal/connector/registry"
)

// sniffRecords is how many leading records CheckKind reads of a file.
const sniffRecords = 20

// CheckKind refuses a file source given the wrong kind before anything is
// stored: when every one of its first records fails to decode as the kind
// given, and most of them decode as another kind, the spec is a mistake (a
// system's dump read as jsonl: every record quarantined as poison, exit 0),
// not a DLQ of bad records. The error says which kind it looks like. A
// file whose records decode under no kind is left to the run, which keeps
// each record as an undecodable entry. Live sources, directories of item
// files and brokers are not checked.
func CheckKind(ctx context.Context, spec string) error {
	kind, path, ok := strings.Cut(spec, ":")
	if !ok || !isFileKind(kind) || strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return nil
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil // Parse reports it
	}
	n, bad := sniff(ctx, spec)
	if n == 0 || bad < n {
		return nil
	}
	for _, other := range registry.FileKinds() {
		if other == kind {
			continue
		}
		m, otherBad := sniff(ctx, other+":"+path)
		if ok := m - otherBad; ok > 0 && 2*ok > m {
			return &UsageError{Spec: spec,
				Err:  fmt.Errorf("none of the first %d records of %s decode as %s, and %d of %d decode as %s", n, path, kind, ok, m, other),
				Hint: "use --source " + other + ":" + path + " (nothing was stored)"}
		}
	}
	return nil
}

func isFileKind(kind string) bool {
	for _, k := range registry.FileKinds() {
		if k == kind {
			return true
		}
	}
	return false
}

// sniff reads up to sniffRecords entries of spec: how many, and how many
// did not decode. A source that cannot be opened counts as none read.
func sniff(ctx context.Context, spec string) (n, bad int) {
	s, err := Parse(spec)
	if err != nil {
		return 0, 0
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for e, err := range s.Entries(ctx) {
		if err != nil {
			return 0, 0
		}
		n++
		if e.Undecodable() {
			bad++
		}
		if n == sniffRecords {
			break
		}
	}
	return n, bad
}
