module github.com/muserhq/muser

go 1.26.8

require github.com/spf13/pflag v1.1.0

require golang.org/x/sys v0.50.0 // indirect
