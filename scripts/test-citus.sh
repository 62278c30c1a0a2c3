#!/usr/bin/env bash
# make test-citus: the PostgreSQL store on a real Citus cluster. Builds and
# installs Citus from ../shared/third_party/citus/ when it is not installed
# (scripts/citus-build.sh), starts a coordinator and two workers on free
# loopback ports (scripts/citus-cluster.sh), and runs the Citus suite with
# IDEMPOTENCY_TEST_CITUS_URL naming the coordinator: pgstore's TestCitus*
# (the whole store contract, transactional bodies and their commit guard,
# EnsureSchema's distribution, the listings' plans, sweep, forget and
# waiters without NOTIFY) and the operator commands' (idempotencyctl);
# then the fault round on the cluster (integration/faultrun's
# TestFaultRunCitus, 24 workflows a round: a worker node stopped and
# restarted, then the coordinator). Exits non-zero when a test fails; the cluster is stopped either way.
#
# Environment: TEST_TIMEOUT (default 15m) bounds go test; CITUS_RUN (a go
# test -run pattern, default '^TestCitus') picks the tests; CITUS_FAULTS=0
# leaves the fault round out; CITUS_BENCH=1
# runs the benchmarks on the cluster instead (make bench-citus): pgstore's
# BenchmarkCitusStore with CITUS_BENCHTIME (default 1x) and CITUS_COUNT
# (default 1), BenchmarkCitusWaitWake (10 waits each), then make bench's
# throughput and per-activity sections with -citus (BENCH_ARGS adds flags;
# they need the PostgreSQL and Redis make services starts).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
timeout=${TEST_TIMEOUT:-15m}

scripts/citus-build.sh

dir=$(mktemp -d "${TMPDIR:-/tmp}/citus-test.XXXXXX")
cleanup() {
	scripts/citus-cluster.sh stop "$dir" || true
	rm -rf "$dir" 2>/dev/null || true
}
trap cleanup EXIT
url=$(scripts/citus-cluster.sh start "$dir" $$)
echo "test-citus: a Citus cluster (coordinator and two workers, citus.shard_count ${CITUS_SHARD_COUNT:-8}) at $url"
export IDEMPOTENCY_TEST_CITUS_URL=$url

if [ -n "${CITUS_BENCH:-}" ]; then
	go test -count="${CITUS_COUNT:-1}" -timeout "$timeout" -run '^$' -bench '^BenchmarkCitusStore$' \
		-benchtime="${CITUS_BENCHTIME:-1x}" ./pgstore/
	go test -count=1 -timeout "$timeout" -run '^$' -bench '^BenchmarkCitusWaitWake$' -benchtime=10x ./pgstore/
	# make bench's throughput and per-activity sections, with pgstore on
	# the cluster beside the floor on the same cluster.
	# shellcheck disable=SC2086 # BENCH_ARGS is flags, split on purpose
	(cd benchmarks && GOTOOLCHAIN=${SERVER_TOOLCHAIN:-go1.27.3} go run . -only throughput,activity -citus "$url" ${BENCH_ARGS:-})
	exit
fi
go test -count=1 -timeout "$timeout" -run "${CITUS_RUN:-^TestCitus}" ./pgstore/ ./cmd/idempotencyctl/
[ "${CITUS_FAULTS:-1}" = 1 ] || exit 0

# The fault round (integration/faultrun, TestFaultRunCitus): worker
# processes killed, the worker node holding the round's tenant stopped
# (pg_ctl stop -m immediate) and started again in one round, the
# coordinator in the other, a ledger outside the store. Last, as it stops
# nodes. An immediate stop loses the commits synchronous_commit=off
# acknowledged (CITUS_FSYNC's default, for the suite's speed), outside the
# promise: the round needs it on, on every node.
read -ra node_ports <"$dir/ports"
for port in "${node_ports[@]}"; do
	"${PG_BIN:-/usr/lib/postgresql/15/bin}/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "${CITUS_DB:-citus}" \
		-c "ALTER SYSTEM SET synchronous_commit = on" -c "SELECT pg_reload_conf()" >/dev/null
done
(cd integration && GOTOOLCHAIN=${SERVER_TOOLCHAIN:-go1.27.3} go test -count=1 -timeout "$timeout" -run '^TestFaultRunCitus$' ./faultrun/)
