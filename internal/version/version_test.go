package version

import (
	"regexp"
	"runtime/debug"
	"testing"
)

// semver is the regular expression semver.org gives for a version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

func TestFormat(t *testing.T) {
	rev := "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	tests := []struct {
		name     string
		v        string
		settings []debug.BuildSetting
		want     string
	}{
		{"no vcs", "0.1.0", nil, "0.1.0"},
		{"clean", "0.1.0", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, "0.1.0+g1a2b3c4d5e6f"},
		{"dirty", "0.1.0", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: rev}}, "0.1.0+g1a2b3c4d5e6f-dirty"},
		{"pre-release", "0.2.0-rc.1", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, "0.2.0-rc.1+gabc"},
		{"metadata given", "0.2.0+build.7", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}, "0.2.0+build.7"},
		{"odd revision", "0.1.0", []debug.BuildSetting{{Key: "vcs.revision", Value: "a.b/c"}}, "0.1.0+gabc"},
		{"only odd characters", "0.1.0", []debug.BuildSetting{{Key: "vcs.revision", Value: "./"}}, "0.1.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := format(tc.v, tc.settings)
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if !semver.MatchString(got) {
				t.Fatalf("%q is not a semantic version", got)
			}
		})
	}
}

func TestString(t *testing.T) {
	if !semver.MatchString(Version) {
		t.Fatalf("Version %q is not a semantic version", Version)
	}
	if s := String(); !semver.MatchString(s) {
		t.Fatalf("String() = %q, not a semantic version", s)
	}
}
