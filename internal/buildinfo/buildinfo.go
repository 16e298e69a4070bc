// Package buildinfo says which replayctl this is: the version, commit and
// build date stamped by -ldflags (the Dockerfile and release builds set them)
// or, failing that, read from the Go module and VCS data the toolchain embeds,
// and the versions of the libraries whose behaviour decisions depend on (OPA
// evaluates the policy, bbolt holds the ledger).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set by the linker:
//
//	-ldflags "-X github.com/replayctl/replayctl/internal/buildinfo.version=v1.2.3
//	          -X github.com/replayctl/replayctl/internal/buildinfo.commit=abc123
//	          -X github.com/replayctl/replayctl/internal/buildinfo.date=2026-11-23T16:00:00Z"
//
// They are variables only because -X can set nothing else; nothing assigns
// them at run time.
var (
	version string
	commit  string
	date    string
)

// Info describes one build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	Modified  bool   `json:"modified,omitempty"`
	Go        string `json:"go"`
	OPA       string `json:"opa"`
	Bbolt     string `json:"bbolt"`
}

const (
	opaModule   = "github.com/open-policy-agent/opa"
	bboltModule = "go.etcd.io/bbolt"
)

// Get returns this binary's build information. Fields nothing knows are
// "unknown", never empty, so a metric label or a bug report always says so.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return from(bi, version, commit, date)
}

func from(bi *debug.BuildInfo, ver, com, dat string) Info {
	in := Info{Version: ver, Commit: com, BuildDate: dat, Go: runtime.Version()}
	if bi != nil {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.time":
				if in.BuildDate == "" {
					in.BuildDate = s.Value
				}
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version
			}
			switch d.Path {
			case opaModule:
				in.OPA = v
			case bboltModule:
				in.Bbolt = v
			}
		}
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion
		}
	}
	for _, f := range []*string{&in.Version, &in.Commit, &in.BuildDate, &in.OPA, &in.Bbolt} {
		if *f == "" {
			*f = "unknown"
		}
	}
	if in.Version == "unknown" {
		in.Version = "devel"
	}
	return in
}
