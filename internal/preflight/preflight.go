package preflight

// Check is the outcome of one preflight check, whichever side ran it
// (PostgreSQL's catalog, Kafka, a standby).
type Check struct {
	Name string
	Err  error  // nil: passed
	Note string // what passing means, e.g. "will be created at start"
	// Warnings are what passes but should be fixed, each with its fix
	// (Prepare logs them).
	Warnings []string
}
