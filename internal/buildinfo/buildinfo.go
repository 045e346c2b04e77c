// Package buildinfo reports which build of AgentOwl is running: its
// version, the commit it was built from and the Go toolchain, read from the
// build information the Go linker embeds (runtime/debug). A release build
// without the repository (a Docker build, say) names them with
// -ldflags "-X github.com/agentowl/agentowl/internal/buildinfo.version=v1.2.3
// -X github.com/agentowl/agentowl/internal/buildinfo.commit=<sha>".
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Set by the linker (-X) for release builds; empty otherwise.
var (
	version string
	commit  string
)

// Info describes the running build.
type Info struct {
	// Version is the release version (v1.2.3), the module version when
	// built with `go install …@version`, or "devel" for a local build.
	Version string `json:"version"`
	// Commit is the VCS revision, with "-dirty" when the tree had
	// uncommitted changes; "unknown" when the build recorded none.
	Commit string `json:"commit"`
	// CommitTime is the revision's commit time (RFC 3339), if recorded.
	CommitTime string `json:"commit_time,omitempty"`
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.0".
	GoVersion string `json:"go_version"`
}

// Get returns the running build's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return from(nil, version, commit)
	}
	return from(bi, version, commit)
}

// from builds Info from build information and the linker-set values, which
// win when set.
func from(bi *debug.BuildInfo, ldVersion, ldCommit string) Info {
	info := Info{Version: "devel", Commit: "unknown", GoVersion: "unknown"}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			info.Commit = rev
			if modified == "true" {
				info.Commit += "-dirty"
			}
		}
	}
	if ldVersion != "" {
		info.Version = strings.TrimSpace(ldVersion)
	}
	if ldCommit != "" {
		info.Commit = strings.TrimSpace(ldCommit)
	}
	return info
}

// String is the one-line form `agentowl version` prints.
func (i Info) String() string {
	s := "agentowl " + i.Version + " (commit " + i.Commit
	if i.CommitTime != "" {
		s += ", " + i.CommitTime
	}
	return s + ", " + i.GoVersion + ")"
}
