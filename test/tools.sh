#!/usr/bin/env bash
# The developer tools of make alerts and make vuln, each built once from
# the Go module proxy at a pinned version into TOOLS (default
# ~/.cache/walrelay/tools) and reused: none is a dependency of walrelay's
# binary or of its go.mod.
#
# usage: test/tools.sh promtool|govulncheck|indexdb   (prints the binary's path)
#        test/tools.sh vulndb                          (prints a file:// URL)
set -euo pipefail

go=${GO:-go}
tools=${TOOLS:-$HOME/.cache/walrelay/tools}
PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}

# install PKG VERSION: the binary of PKG@VERSION in a directory of its own.
install() {
	local pkg=$1 version=$2 dir bin
	dir=$tools/$(basename "$pkg")-$version
	bin=$dir/$(basename "$pkg")
	if [[ ! -x $bin ]]; then
		echo "tools: building $pkg@$version into $dir (once; promtool takes minutes)" >&2
		# N.B. outside this module: the tool's own go.mod decides its
		# dependencies, and walrelay's go.mod and go.sum stay as they are.
		(cd "$(mktemp -d)" && GOBIN=$dir GOFLAGS=-mod=mod "$go" install "$pkg@$version") >&2
	fi
	echo "$bin"
}

case ${1:-} in
promtool) install github.com/prometheus/prometheus/cmd/promtool "$PROMTOOL_VERSION" ;;
govulncheck) install golang.org/x/vuln/cmd/govulncheck "$GOVULNCHECK_VERSION" ;;
indexdb) install golang.org/x/vulndb/cmd/indexdb "$VULNDB_VERSION" ;;
vulndb)
	# A Go vulnerability database (the layout of vuln.go.dev) made from
	# the OSV entries in golang.org/x/vulndb@VULNDB_VERSION, a module the
	# Go module proxy serves: for machines that cannot reach vuln.go.dev.
	dir=$tools/vulndb-$VULNDB_VERSION
	if [[ ! -f $dir/index/modules.json ]]; then
		indexdb=$("$0" indexdb)
		src=$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod "$go" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[[ -d $src/data/osv ]] || { echo "tools: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv" >&2; exit 1; }
		rm -rf "$dir.tmp"
		"$indexdb" -vulns "$src/data/osv" -out "$dir.tmp" >&2
		# N.B. the snapshot is as new as its pseudo-version's time, which
		# govulncheck shows as the database's modification time.
		ts=${VULNDB_VERSION#v0.0.0-}
		ts=${ts%%-*}
		printf '{"modified":"%s-%s-%sT%s:%s:%sZ"}' "${ts:0:4}" "${ts:4:2}" "${ts:6:2}" "${ts:8:2}" "${ts:10:2}" "${ts:12:2}" >"$dir.tmp/index/db.json"
		mv "$dir.tmp" "$dir"
	fi
	echo "file://$dir"
	;;
*)
	echo "usage: $0 promtool|govulncheck|indexdb|vulndb" >&2
	exit 2
	;;
esac
