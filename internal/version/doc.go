// Package version is muser's one version source: a semantic version
// (Version, overridable at link time) with the VCS revision of the build
// appended as semver build metadata when the binary was built from a
// checkout.
//
// # Format
//
//	0.1.0                   a build without VCS information (go install of a module, tests)
//	0.1.0+g1a2b3c4d5e6f     built from a clean checkout at that commit (12 hex digits)
//	0.1.0+g1a2b3c4d5e6f-dirty  built from a checkout with uncommitted changes
//
// A release sets the version with
//
//	go build -ldflags "-X github.com/muserhq/muser/internal/version.Version=0.2.0" ./cmd/muser
//
// The go command stamps the revision (vcs.revision, vcs.modified) when it
// builds the main module from a git clone with -buildvcs on (its default
// auto mode, unless GOFLAGS says -buildvcs=false); a git worktree, whose
// .git is a file, is not stamped.
//
// A Version that already carries build metadata ("+...") is used as it
// is. String is what `muser version` prints first, what GET /api/version
// (Ollama's, which clients parse as semver) and /props report.
package version
