module github.com/muserhq/muser

go 1.26.8

require (
	github.com/spf13/pflag v1.1.0
	github.com/zeebo/blake3 v0.2.4
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
)

require github.com/klauspost/cpuid/v2 v2.0.12 // indirect
