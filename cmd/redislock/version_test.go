package main

import (
	"runtime/debug"
	"testing"
)

// version says the release tag when there is one, and otherwise
// "(devel)" with whatever VCS stamp the build has: never a made-up number.
func TestVersionOf(t *testing.T) {
	stamp := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-12-01T16:00:00Z"},
	}
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install @v0.1.0", debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}, Settings: stamp}, "v0.1.0"},
		{"go build in a clone", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: stamp},
			"(devel) 0123456789ab 2026-12-01T16:00:00Z"},
		{"uncommitted changes", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: append(stamp, debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			"(devel) 0123456789ab 2026-12-01T16:00:00Z (modified)"},
		{"go run, no stamp", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
		{"no version at all", debug.BuildInfo{}, "(devel)"},
	} {
		if got := versionOf(&tc.info); got != tc.want {
			t.Errorf("%s: versionOf() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
