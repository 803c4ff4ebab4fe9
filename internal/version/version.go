package version

import (
	"runtime/debug"
	"strings"
)

// Version is muser's semantic version (MAJOR.MINOR.PATCH, with an
// optional pre-release), without build metadata. Set it with -ldflags
// "-X github.com/muserhq/muser/internal/version.Version=X.Y.Z".
var Version = "0.1.0"

// String returns Version with the build's VCS revision as build metadata
// (see the package documentation).
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	return format(Version, bi.Settings)
}

func revision(settings []debug.BuildSetting) (rev string, dirty bool) {
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return rev, dirty
}

// format appends "+g<first 12 hex digits of the revision>" and "-dirty"
// to v, unless v already has build metadata or there is no revision.
func format(v string, settings []debug.BuildSetting) string {
	if strings.Contains(v, "+") {
		return v
	}
	rev, dirty := revision(settings)
	if rev == "" {
		return v
	}
	// Only [0-9A-Za-z-] may appear in build metadata.
	rev = strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return -1
	}, rev)
	if rev == "" {
		return v
	}
	v += "+g" + rev[:min(len(rev), 12)]
	if dirty {
		v += "-dirty"
	}
	return v
}
