#!/usr/bin/env bash
# s3server.sh installs the S3-compatible server the store/tier tests run on
# loopback: versitygw (Apache-2.0, an S3 gateway over a POSIX directory),
# pinned, into $HOME/.cache/muser/versitygw-$VERSION/ once (CI keeps
# $HOME/.cache between runs). It prints the binary's path; the tests find
# it through MUSER_S3_SERVER or that path.
set -euo pipefail
VERSION=v1.8.0
dir="$HOME/.cache/muser/versitygw-$VERSION"
bin="$dir/versitygw"
if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "s3server.sh: building versitygw $VERSION into $dir (about 2 minutes, once)" >&2
	(cd "${TMPDIR:-/tmp}" && GOBIN="$dir" GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSION")
fi
echo "$bin"
