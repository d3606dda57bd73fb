package fleet

import (
	"fmt"
	"net/http"
)

// readyPipelinePath is the per-pipeline form of /readyz.
const readyPipelinePath = "/readyz/{pipeline}"

// serveReadyPipeline answers /readyz/NAME: 200 while pipeline NAME streams
// in this process, 503 with why otherwise (another replica of the group
// runs it, this one is joining the group, it starts, waits for its slot,
// restarts or stopped on an error), 404 for a name the file lacks.
func (f *fleet) serveReadyPipeline(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("pipeline")
	for _, m := range f.members {
		if m.name != name {
			continue
		}
		if ok, why := f.readyPipeline(m); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
		return
	}
	http.Error(w, fmt.Sprintf("no pipeline %q in the pipeline file", name), http.StatusNotFound)
}

// readyPipeline is m's readiness here, and why not.
func (f *fleet) readyPipeline(m *member) (bool, string) {
	if f.group != nil && !f.group.joined.Load() {
		return false, fmt.Sprintf("not ready: %s: joining group %s", m.name, f.group.name)
	}
	if !m.here() {
		return false, fmt.Sprintf("not ready: %s: runs on another replica of group %s, not on %s", m.name, f.group.name, f.group.instance)
	}
	if s := m.stopped.Load(); s != nil {
		return false, "not ready: " + m.name + ": stopped: " + *s
	}
	relay, _ := m.live()
	if ok, why := relay.Ready(); !ok {
		return false, "not ready: " + m.name + ": " + why
	}
	return true, ""
}
