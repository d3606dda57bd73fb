package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// markupName is the name TestFleetStatusPageInBrowser gives the shipping
// pipeline: markup, which the page must show as text.
const markupName = "<b>ship</b>"

// pageRow is a row of the status page as Chromium rendered it:
// <tr class="row" data-pipeline="NAME" data-state="STATE">.
var pageRow = regexp.MustCompile(`<tr class="row" data-pipeline="([^"]*)" data-state="([^"]*)">`)

// TestFleetStatusPageInBrowser: headless Chromium loads the status page of
// a running fleet of three pipelines, one named with markup, after writers
// on all: one row per pipeline, in /pipelines' order with its states; the
// name's markup is text, not an element; each row has its database's name
// and slot, and a chart; no connection string. The screenshot is checked
// as a 1200x600 PNG (docs/fleet-status.png is one; set
// WALRELAY_FLEET_SCREENSHOT=FILE to keep it).
func TestFleetStatusPageInBrowser(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): install it: apt-get install -y chromium", err)
	}
	p, envs := startFleetWith(t, func(s string) string {
		return strings.Replace(s, "- name: shipping", fmt.Sprintf("- name: %q", markupName), 1)
	})
	for _, e := range envs {
		waitStreaming(t, p, e)
	}
	rolledBack := write(t, 300, envs...)
	for _, e := range envs {
		readBack(t, e, rolledBack, false)
	}
	// N.B. a point of the chart every 10 s: wait until each row has a
	// line with the writes in it; then a second round of writes, and a
	// point after it.
	harness.WaitFor(t, time.Minute, "each row of / to chart its events", func() bool {
		_, body := p.Get("/")
		return chartPoints(body, len(envs)) >= 2 && !strings.Contains(body, "peak 0/s")
	})
	_, page := p.Get("/")
	n := chartPoints(page, len(envs))
	for id := range write(t, 100, envs...) {
		rolledBack[id] = true
	}
	for _, e := range envs {
		readBack(t, e, rolledBack, false)
	}
	harness.WaitFor(t, time.Minute, "each row of / to chart a point after the second writes", func() bool {
		_, body := p.Get("/")
		return chartPoints(body, len(envs)) > n
	})
	harness.WaitFor(t, time.Minute, "/readyz to answer 200", func() bool { return p.Ready() == 200 })
	url := "http://" + p.HTTPAddr() + "/"

	dom := runChromium(t, chromium, "--dump-dom", url)
	code, body := p.Get("/pipelines")
	if code != 200 {
		t.Fatalf("/pipelines: %d %s", code, body)
	}
	var want []string
	for _, s := range decodePipelines(t, body) {
		want = append(want, fmt.Sprintf("%v %v", s["name"], s["state"]))
	}
	var got []string
	for _, m := range pageRow.FindAllStringSubmatch(dom, -1) {
		got = append(got, html.UnescapeString(m[1])+" "+html.UnescapeString(m[2]))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows of the rendered page:\n%s\nwant /pipelines':\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(dom, `<td class="name">&lt;b&gt;ship&lt;/b&gt;</td>`) || strings.Contains(dom, "<b>") {
		t.Errorf("the name %s is not shown as text (or is an element) in the rendered page:\n%s", markupName, dom)
	}
	for _, e := range envs {
		if want := e.Database(t) + " · " + e.Slot; !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q (pipeline %s's database and slot)", want, e.name)
		}
		if strings.Contains(dom, e.DSN) {
			t.Errorf("the rendered page holds pipeline %s's connection string", e.name)
		}
	}
	if got := strings.Count(dom, "<polyline"); got != len(envs) || strings.Contains(dom, "postgres://") {
		t.Errorf("%d charts, want %d, and no connection string:\n%s", got, len(envs), dom)
	}
	if code, _ := p.Get("/no-such-page"); code != 404 {
		t.Errorf("GET /no-such-page: %d, want 404 (the page is at / alone)", code)
	}

	shot := filepath.Join(t.TempDir(), "fleet-status.png")
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1200,600", "--hide-scrollbars", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 600 {
		t.Errorf("screenshot %dx%d, want 1200x600", b.Dx(), b.Dy())
	}
	if keep := os.Getenv("WALRELAY_FLEET_SCREENSHOT"); keep != "" {
		data, _ := os.ReadFile(shot)
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot kept in %s", keep)
	}
	if code := p.Stop(time.Minute); code != 0 {
		t.Errorf("walrelay exit code %d after SIGTERM, want 0", code)
	}
}

// runChromium runs headless Chromium with args and returns its output
// (--dump-dom's DOM).
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, chromium, all...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// decodePipelines decodes a /pipelines body.
func decodePipelines(t *testing.T, body string) []map[string]any {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("/pipelines: %v: %s", err, body)
	}
	return list
}

// chart is a row's chart on the status page.
var chart = regexp.MustCompile(`<polyline points="([^"]*)"`)

// chartPoints is the fewest points of the charts of page, 0 when it has
// fewer than rows charts.
func chartPoints(page string, rows int) int {
	ms := chart.FindAllStringSubmatch(page, -1)
	if len(ms) < rows {
		return 0
	}
	fewest := -1
	for _, m := range ms {
		if n := len(strings.Fields(m[1])); fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return fewest
}

// TestFleetStatusPageSinglePipeline: a single walrelay (no --config)
// serves the status page too: one row, named after its slot, streaming,
// with its database's name; no connection string.
func TestFleetStatusPageSinglePipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.Start(t)
	p.WaitStreaming()
	var page string
	harness.WaitFor(t, time.Minute, "/ to show the pipeline streaming", func() bool {
		_, page = p.Get("/")
		return strings.Contains(page, `data-state="streaming"`)
	})
	rows := pageRow.FindAllStringSubmatch(page, -1)
	if len(rows) != 1 || html.UnescapeString(rows[0][1]) != e.Slot || !strings.Contains(page, e.Database(t)+" · "+e.Slot) {
		t.Errorf("want one row, %s, with database %s:\n%s", e.Slot, e.Database(t), page)
	}
	if strings.Contains(page, e.DSN) || strings.Contains(page, "postgres://") {
		t.Errorf("the page holds the connection string:\n%s", page)
	}
}
