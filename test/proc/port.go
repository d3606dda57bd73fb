package proc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// portsFrom is the lowest port FreePort returns.
const portsFrom = 10000

// FreePort returns a TCP port on 127.0.0.1 that nothing listened on a moment
// ago, for a server the caller starts next: a random one below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range), checked by
// binding it.
//
// N.B. not one the kernel picks (127.0.0.1:0): those are of the ephemeral
// range, which the kernel also gives every outgoing connection on the
// machine as its source port, so between the check and the server's bind
// any connection could take it. With make test's three beds and another
// suite beside them, walrelay's --http-addr in TestReadmeWalkthrough was
// taken so ("bind: address already in use"). Below the range, only another
// server's explicit bind can take it.
func FreePort() (int, error) {
	below := ephemeralFrom()
	if below-portsFrom < 1000 {
		return kernelPort()
	}
	for range 200 {
		p := portsFrom + rand.IntN(below-portsFrom)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("find free port: 200 random ports in %d-%d were taken", portsFrom, below-1)
}

// ephemeralFrom is the first port of the kernel's ephemeral range (Linux's
// default 32768 when it cannot be read).
func ephemeralFrom() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// kernelPort is a port the kernel picks, when the ephemeral range leaves
// too few below it.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is FreePort as a loopback address, 127.0.0.1:PORT.
func FreeAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
