#!/usr/bin/env bash
# make matrix: the e2e suite (test/e2e/...) and the short fault run (kill
# -9, PostgreSQL restart, PostgreSQL connection cuts) on each PostgreSQL
# version, each on a bed of its own (test/cmd/testbed with
# WALRELAY_TEST_PG_VERSION). Writes
# OUT/DATE-HOST-pg-matrix.md: a table version x scenario x
# lost/phantom/order/duplicates/time and the RESULT and FIGURES lines; the
# full go test output goes next to it (.log per version). Exit 1 if any
# version failed; every version runs regardless.
#
# usage: test/matrix.sh OUT_DIR [VERSION...]   (default 14 15 16 17 18)
set -uo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: test/matrix.sh OUT_DIR [VERSION...]}
shift
versions=("$@")
((${#versions[@]})) || versions=(14 15 16 17 18)
go=${GO:-go}
faults='^(TestKill9|TestPostgresRestart|TestPostgresConnectionCuts)$'

mkdir -p "$out"
stamp="$(date -u +%Y-%m-%d-%H%M%S)-$(hostname -s)"
report="$out/$stamp-pg-matrix.md"
logs="$out/$stamp-pg-matrix"
mkdir -p "$logs"

failed=0
{
  echo "# PostgreSQL matrix $stamp"
  echo
  echo "$(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; $($go version)"
  echo
  echo "| PostgreSQL | scenario | result | lost | phantom | order violations | duplicates | time |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$report"

for v in "${versions[@]}"; do
  log="$logs/pg$v.log"
  echo "matrix: PostgreSQL $v (log $log)"
  # N.B. the e2e packages (test/e2e and its kafkaside and failover) and the
  # faults run on one bed; a failing e2e run does not skip the faults.
  WALRELAY_TEST_PG_VERSION=$v $go run ./test/cmd/testbed -- bash -c '
    "$0" test -count=1 -v -timeout 45m ./test/e2e/...; e=$?
    "$0" test -count=1 -v -timeout 45m -run "$1" ./test/fault/; f=$?
    exit $((e | f))' "$go" "$faults" >"$log" 2>&1
  rc=$?
  ((rc == 0)) || failed=1
  # The server's own version, e.g. 17.10.
  pg=$(sed -n 's/^testbed: PostgreSQL \([^ ]*\) and Kafka.*/\1/p' "$log" | head -n 1)
  awk -v pg="${pg:-$v (did not start)}" -v rc="$rc" '
    # top-level e2e tests and the fault scenarios
    /^--- (PASS|FAIL): / {
      name = $3; time = $4; gsub(/[()]/, "", time)
      status[name] = $2; dur[name] = time; order[++n] = name
    }
    # the times of the e2e packages, added up
    /^(ok|FAIL)[ \t]+github.com\/walrelay\/walrelay\/test\/e2e/ { t = $NF; sub(/s$/, "", t); e2esecs += t; e2etime = e2esecs "s" }
    / RESULT Test/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "RESULT") name = $(i + 1)
        split($i, kv, "=")
        if (kv[1] ~ /^(lost|phantom|order_violations|duplicates)$/) res[name, kv[1]] = kv[2]
      }
    }
    END {
      pass = 0; fail = 0; failedNames = ""
      for (i = 1; i <= n; i++) {
        name = order[i]
        if ((name, "lost") in res) continue
        if (status[name] == "PASS:") pass++; else { fail++; failedNames = failedNames " " name }
      }
      printf "| %s | e2e suite (%d tests) | %s | | | | | %s |\n", pg, pass + fail, (fail ? "FAIL" failedNames : "pass"), e2etime
      for (i = 1; i <= n; i++) {
        name = order[i]
        if (!((name, "lost") in res)) continue
        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", pg, name, (status[name] == "PASS:" ? "pass" : "FAIL"),
          res[name, "lost"], res[name, "phantom"], res[name, "order_violations"], res[name, "duplicates"], dur[name]
      }
      if (n == 0) printf "| %s | (no test ran, exit %s: see the log) | FAIL | | | | | |\n", pg, rc
    }' "$log" >>"$report"
done

{
  echo
  echo "Raw lines (full output in $(basename "$logs")/ beside this file):"
  echo
  echo '```'
  for v in "${versions[@]}"; do
    grep -hE ' (RESULT|FIGURES) ' "$logs/pg$v.log" | sed "s/^ *[a-z0-9_]*\.go:[0-9]*: /pg$v /"
  done
  echo '```'
} >>"$report"

cat "$report"
exit $failed
