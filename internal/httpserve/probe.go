package httpserve

import (
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ReadyURL is the /readyz URL of a walrelay serving on addr (Config.Addr,
// host:port or :port); an unspecified host is probed on 127.0.0.1.
func ReadyURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// Probe GETs url, within 5 seconds, and returns the response's status and
// the first 4 KiB of its body, trimmed, on one line, and whether the status
// is 200 OK.
func Probe(url string) (line string, ok bool, err error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.Status + " " + strings.TrimSpace(string(body)), resp.StatusCode == http.StatusOK, nil
}
