package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/agentowl/agentowl", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-10-06T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}}
	got := from(bi, "", "")
	want := Info{Version: "devel", Commit: "abc123-dirty", CommitTime: "2026-10-06T12:00:00Z", GoVersion: "go1.26.0"}
	if got != want {
		t.Errorf("from(devel build) = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "agentowl devel (commit abc123-dirty, 2026-10-06T12:00:00Z, go1.26.0)" {
		t.Errorf("String() = %q", s)
	}

	bi.Main.Version, bi.Settings = "v1.4.0", nil
	if got := from(bi, "", ""); got.Version != "v1.4.0" || got.Commit != "unknown" {
		t.Errorf("from(go install build) = %+v, want version v1.4.0, commit unknown", got)
	}
	// Linker-set values win: a Docker build has no .git to read.
	if got := from(bi, "v2.0.0\n", "def456"); got.Version != "v2.0.0" || got.Commit != "def456" || got.GoVersion != "go1.26.0" {
		t.Errorf("from(ldflags build) = %+v", got)
	}
	if got := from(nil, "", ""); got.Version != "devel" || got.Commit != "unknown" || got.GoVersion != "unknown" {
		t.Errorf("from(no build info) = %+v", got)
	}
}

// The test binary itself carries build information: Get reads it.
func TestGetReadsTheRunningBinary(t *testing.T) {
	t.Parallel()
	got := Get()
	if got.GoVersion != runtime.Version() {
		t.Errorf("Get().GoVersion = %q, want %q", got.GoVersion, runtime.Version())
	}
	if got.Version == "" || got.Commit == "" || !strings.HasPrefix(got.String(), "agentowl ") {
		t.Errorf("Get() = %+v", got)
	}
}
