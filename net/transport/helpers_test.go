package transport

import "github.com/muserhq/muser/net/cluster"

func clustertestOpen(home string) (*cluster.Home, error) { return cluster.Open(home) }
