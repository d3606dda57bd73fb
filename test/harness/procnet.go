package harness

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// TCPPeers returns the remote addresses (ip:port) of the TCP connections
// process pid holds, read from /proc: what it really talks to.
func TCPPeers(pid int) ([]string, error) {
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var peers []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] || fields[3] != "01" { // 01: ESTABLISHED
				continue
			}
			if addr, err := parseProcAddr(fields[2]); err == nil {
				peers = append(peers, addr)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return peers, nil
}

// parseProcAddr decodes /proc/net/tcp's "0100007F:1F90": the address in
// host byte order per 32-bit word (little-endian here), the port in hex.
func parseProcAddr(s string) (string, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil {
		return "", err
	}
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return "", err
	}
	ip := net.IP(raw)
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(port, 10)), nil
}

// ConnectionsTo counts the TCP connections process pid holds to any of
// addrs (host:port; matched by port, as the bed's servers listen on
// loopback).
func ConnectionsTo(pid int, addrs []string) (int, error) {
	peers, err := TCPPeers(pid)
	if err != nil {
		return 0, err
	}
	ports := map[string]bool{}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err == nil {
			ports[port] = true
		}
	}
	n := 0
	for _, a := range peers {
		if _, port, err := net.SplitHostPort(a); err == nil && ports[port] {
			n++
		}
	}
	return n, nil
}
