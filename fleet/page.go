package fleet

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// page is the status page at /: one row per pipeline, from the data of
// /pipelines, plus each one's parked aggregates and events-per-second
// chart. html/template escapes every value: a pipeline name or an error
// holding markup shows as text.
//
//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// pageData is what page.html renders.
type pageData struct {
	Rows   []pageRow
	Ready  int
	Events string // the pipelines' events per second, together
	At     string // when the page was rendered, UTC
}

// pageRow is one pipeline's row: its Status, and what only the page shows.
type pageRow struct {
	Status
	// Database is the database's name alone: never its URL, which may
	// hold a password.
	Database string
	Parked   float64
	Lag      string // SlotLagBytes, in B, KiB, MiB or GiB
	Oldest   string // OldestUnackedSeconds, as a duration
	Chart    chart
}

// chart is a row's inline SVG line of events per second, one point per
// historyEvery, the newest at the right edge.
type chart struct {
	Width, Height int
	Points        string // the polyline's, "x,y x,y ..."; "" with fewer than 2
	Area          string // the polygon under it
	Peak          string // the highest point, events/s
	Minutes       int    // the span of the x axis
}

// The chart's size; its x axis spans the history held, at least
// chartMinSteps points (2 minutes), at most historyLen (10).
const (
	chartWidth, chartHeight = 150, 28
	chartMinSteps           = 12
)

// servePage answers / with the status page.
func (f *fleet) servePage(w http.ResponseWriter, _ *http.Request) {
	d := pageData{At: time.Now().UTC().Format("2006-01-02 15:04:05 UTC")}
	total := 0.0
	for i, s := range f.statuses() {
		m := f.members[i]
		if s.Ready {
			d.Ready++
		}
		total += s.EventsPerSecond
		d.Rows = append(d.Rows, pageRow{Status: s, Database: m.db, Parked: m.values()[parkedMetric],
			Lag: bytesText(s.SlotLagBytes), Oldest: secondsText(s.OldestUnackedSeconds), Chart: newChart(m.history.rates())})
	}
	d.Events = strconv.FormatFloat(math.Round(100*total)/100, 'f', -1, 64)
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, d); err != nil {
		http.Error(w, "render the status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// N.B. the page is read-only and has no script: forbid any, and
	// framing, should a value ever slip past the escaping.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b.Bytes())
}

// newChart draws rates (the oldest first) right-aligned, scaled to the
// highest.
func newChart(rates []float64) chart {
	span := min(historyLen, max(len(rates), chartMinSteps))
	c := chart{Width: chartWidth, Height: chartHeight, Minutes: int(math.Round((time.Duration(span) * historyEvery).Minutes()))}
	peak := 0.0
	for _, r := range rates {
		peak = max(peak, r)
	}
	c.Peak = strconv.FormatFloat(math.Round(100*peak)/100, 'f', -1, 64)
	if len(rates) < 2 {
		return c
	}
	step := float64(chartWidth) / float64(span-1)
	var pts []string
	for i, r := range rates {
		x := float64(chartWidth) - float64(len(rates)-1-i)*step
		y := float64(chartHeight)
		if peak > 0 {
			y -= r / peak * float64(chartHeight-2)
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	c.Points = strings.Join(pts, " ")
	first := float64(chartWidth) - float64(len(rates)-1)*step
	c.Area = fmt.Sprintf("%.1f,%d %s %d,%d", first, chartHeight, c.Points, chartWidth, chartHeight)
	return c
}

// bytesText is n bytes in the largest unit under which it is at least 1.
func bytesText(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// secondsText is s seconds as a duration, to the second ("0s" when none).
func secondsText(s float64) string {
	return (time.Duration(math.Round(s)) * time.Second).String()
}

// databaseName is the name of the database connString reaches, "" when it
// does not parse: the page shows it, never the URL (it may hold a password).
func databaseName(connString string) string {
	c, err := pgconn.ParseConfig(connString)
	if err != nil {
		return ""
	}
	return c.Database
}
