package llm

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// setRcvLowat sets SO_RCVLOWAT on the TCP connection under c (under TLS too): Linux then
// reports the socket readable, and wakes the Go network poller, only once n bytes have arrived
// (or the connection ends), instead of on every packet.
func setRcvLowat(c net.Conn, n int) error {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
