package pipeline

// LastError is the error of the relay's last failed attempt, which it
// restarted after; "" when none failed. For the fleet's /pipelines.
func (r *Relay) LastError() string {
	if f := r.failure.Load(); f != nil {
		return *f
	}
	return ""
}
