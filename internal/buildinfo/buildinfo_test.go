package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromPrefersLinkerStamps(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/replayctl/replayctl", Version: "v0.0.0-20261123-abc"},
		Deps: []*debug.Module{
			{Path: opaModule, Version: "v1.22.2"},
			{Path: bboltModule, Version: "v1.4.0", Replace: &debug.Module{Path: "example.com/bbolt", Version: "v1.5.0-fork"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "vcsrev"}, {Key: "vcs.time", Value: "2026-01-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}},
	}
	got := from(bi, "v1.2.3", "ldcommit", "")
	want := Info{Version: "v1.2.3", Commit: "ldcommit", BuildDate: "2026-01-01T00:00:00Z", Modified: true, Go: "go1.99.1", OPA: "v1.22.2", Bbolt: "v1.5.0-fork"}
	if got != want {
		t.Fatalf("from = %+v, want %+v", got, want)
	}
}

func TestFromWithoutBuildInfoSaysUnknown(t *testing.T) {
	got := from(nil, "", "", "")
	if got.Version != "devel" || got.Commit != "unknown" || got.BuildDate != "unknown" || got.OPA != "unknown" || got.Bbolt != "unknown" || got.Go == "" {
		t.Fatalf("from(nil) = %+v: every field must be filled", got)
	}
	// A devel main module is not a version.
	got = from(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "", "")
	if got.Version != "devel" {
		t.Fatalf("Version = %q, want devel", got.Version)
	}
}
