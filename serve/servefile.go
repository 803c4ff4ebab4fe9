package serve

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/muserhq/muser/serve/adminapi"
)

// announce writes Home/serve.json (adminapi.ServeFile) so that the pack
// and receipts commands reach this server's admin endpoint while it owns
// the store; the returned function removes it. A server given a Store by
// its caller does not own the home and writes nothing.
func (s *Server) announce(ln net.Listener) func() {
	if !s.ownStore {
		return func() {}
	}
	addr := ln.Addr().String()
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		host := "127.0.0.1"
		if ta.IP.To4() == nil {
			host = "::1"
		}
		addr = net.JoinHostPort(host, strconv.Itoa(ta.Port))
	}
	sf := adminapi.ServeFile{URL: "http://" + addr, PID: os.Getpid(), Started: time.Now().UTC()}
	if s.opts.AdminKeyFile != "" {
		if abs, err := filepath.Abs(s.opts.AdminKeyFile); err == nil {
			sf.AdminKeyFile = abs
		}
	}
	if err := adminapi.WriteServeFile(s.opts.Home, sf); err != nil {
		s.log.Warn("the pack and receipts commands will not find this server", "err", err)
		return func() {}
	}
	return func() {
		if err := adminapi.RemoveServeFile(s.opts.Home, sf.PID); err != nil {
			s.log.Warn("removing the serve file", "err", err)
		}
	}
}
