//go:build !linux

package llm

import (
	"errors"
	"net"
)

// setRcvLowat is Linux only (elsewhere SO_RCVLOWAT does not hold back the poller's wake-ups).
func setRcvLowat(net.Conn, int) error { return errors.New("SO_RCVLOWAT: Linux only") }
