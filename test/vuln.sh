#!/usr/bin/env bash
# make vuln: govulncheck over every package of the module, against
# GOVULNDB (default https://vuln.go.dev). Where vuln.go.dev cannot be
# reached (this project's machines reach only package registries), it
# checks against the snapshot of golang.org/x/vulndb pinned in
# test/tools.sh (VULNDB_VERSION), from the Go module proxy, and says so:
# a vulnerability published after the snapshot is not seen there.
# GOVULNDB=snapshot uses the snapshot whatever is reachable.
# Exit status is govulncheck's: 0 nothing found, 3 vulnerable code called.
set -euo pipefail
cd "$(dirname "$0")/.."

govulncheck=$(test/tools.sh govulncheck)
db=${GOVULNDB:-https://vuln.go.dev}
if [[ $db == snapshot ]] || { [[ $db == https://vuln.go.dev ]] && ! curl -fsS -m 10 -o /dev/null "$db/index/db.json" 2>/dev/null; }; then
	[[ $db == snapshot ]] || echo "vuln: $db cannot be reached from this machine." >&2
	db=$(test/tools.sh vulndb)
	echo "vuln: checking against the snapshot $db (golang.org/x/vulndb from the Go module proxy; its date is the 'DB updated' below): vulnerabilities published since are not in it. Run make vuln where vuln.go.dev is reachable, set GOVULNDB to a mirror's URL, or raise VULNDB_VERSION in test/tools.sh." >&2
fi
echo "vuln: govulncheck -db $db ./..." >&2
exec "$govulncheck" -db "$db" -show version ./...
