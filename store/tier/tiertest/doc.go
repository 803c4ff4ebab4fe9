// Package tiertest runs a real S3-compatible server on loopback for the
// tests of the fleet tier: versitygw (Apache-2.0) over a POSIX directory
// in the test's temporary directory, installed by scripts/s3server.sh.
//
// The server binary is MUSER_S3_SERVER, else
// $HOME/.cache/muser/versitygw-VERSION/versitygw. Without it a test
// skips, except under CI=true or MUSER_REQUIRE_S3=1, where it fails.
package tiertest
