package fleet

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walrelay/walrelay/internal/httpserve"
)

// PrintStatus is `walrelay status --config FILE`: it GETs /pipelines from
// the fleet running FILE (on the file's http-addr, or the command line's
// --http-addr, which wins) and prints one line per pipeline. It returns 0
// when every pipeline is ready, 1 when one is not or the fleet does not
// answer, 2 for a file with mistakes (all printed, as run does) or no
// address to ask.
func PrintStatus(file string, top *flag.FlagSet, newPipeline NewPipeline, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay: --config: %v\n", err)
		return exitConfig
	}
	if _, ms := load(data, top, newPipeline); len(ms) > 0 {
		fmt.Fprintf(stderr, "walrelay: invalid configuration in %s:\n%s", file, format(file, ms))
		return exitConfig
	}
	addr := top.Lookup("http-addr").Value.String()
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
		fmt.Fprintf(stderr, "walrelay status: http-addr %q of %s names no port to ask: pass --http-addr HOST:PORT, the address the fleet logged with \"serving /pipelines\"\n", addr, file)
		return exitConfig
	}
	ready, err := httpserve.ReadyURL(addr)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay status: http-addr %q: %v\n", addr, err)
		return exitConfig
	}
	url := strings.TrimSuffix(ready, "/readyz") + "/pipelines"
	list, err := fetchPipelines(url)
	if err != nil {
		fmt.Fprintf(stderr, "walrelay status: %v\n", err)
		return exitRuntime
	}
	notReady := writeStatus(stdout, list)
	if notReady > 0 {
		fmt.Fprintf(stderr, "walrelay status: %d of %d pipelines not ready\n", notReady, len(list))
		return exitRuntime
	}
	return exitOK
}

// fetchPipelines GETs url (a fleet's /pipelines), within 5 seconds.
func fetchPipelines(url string) ([]Status, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("ask the fleet: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var list []Status
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("read %s: %w (is it a fleet, walrelay run --config?)", url, err)
	}
	return list, nil
}

// writeStatus prints list, a header and one line per pipeline, in columns,
// and returns how many are not ready; one a group runs on another replica
// (elsewhere) is that replica's to answer for.
func writeStatus(w io.Writer, list []Status) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tSTATE\tREADY\tSLOT\tLAG\tPUBLISHED\tEVENTS/S\tOLDEST_UNACKED\tOWNER\tLAST_ERROR")
	notReady := 0
	for _, s := range list {
		if !s.Ready && s.State != stateElsewhere {
			notReady++
		}
		last := strings.Join(strings.Fields(s.LastError), " ")
		if last == "" {
			last = "-"
		}
		// N.B. no space but in the last column: a script splits the
		// line on blanks.
		lag := strings.ReplaceAll(bytesText(s.SlotLagBytes), " ", "")
		owner := s.Owner
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%.0f\t%.2f\t%s\t%s\t%s\n", s.Name, s.State, s.Ready, s.Slot, lag,
			s.EventsPublished, s.EventsPerSecond, secondsText(s.OldestUnackedSeconds), owner, last)
	}
	tw.Flush()
	return notReady
}
