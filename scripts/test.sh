#!/usr/bin/env bash
# make test: every test — the library (on the SDK go.mod names and on the
# newest), the contrib modules, then the real-server modules — each go test
# through internal/tools/testsum, which prints what go test prints and
# counts the tests. It stops at the first step that fails, and always ends
# with how long it took and one line of its own:
#
#	412 passed, 0 failed, 3 skipped
#
# exiting non-zero when anything failed. The Makefile passes TEST_TIMEOUT,
# SERVER_TOOLCHAIN, CONTRIB_MODULES and SERVER_MODULES.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
export TESTSUM="$tmp/testsum" TEST_TALLY="$tmp/tally"
start=$(date +%s)
finish() {
	rc=$?
	elapsed=$(($(date +%s) - start))
	echo "== make test took $((elapsed / 60))m$((elapsed % 60))s"
	read -r passed failed skipped 2>/dev/null <"$TEST_TALLY" || passed=0 failed=0 skipped=0
	if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
		failed=1 # a step failed outside go test (a script, a build): one failure
	fi
	faultpoints
	summary="$passed passed, $failed failed"
	[ "$skipped" = 0 ] || summary="$summary, $skipped skipped"
	echo "$summary"
	rm -rf "$tmp"
	[ "$failed" = 0 ] || rc=1
	exit "$rc"
}

# faultpoints prints the lines the fault-at-every-store-call tests
# (interceptor/faultpoint_test.go) appended to $FAULT_POINTS — "… fault
# points: N, second effects: M", one per store — and their sum: go test
# shows a passing test's output only with -v.
faultpoints() {
	[ -s "$FAULT_POINTS" ] || return 0
	echo "== fault at every store call"
	cat "$FAULT_POINTS"
	awk '{ for (i = 1; i < NF; i++) { if ($i == "points:") p += $(i+1); if ($i == "effects:") e += $(i+1) } }
		END { printf "fault points in all: %d, second effects: %d\n", p, e }' "$FAULT_POINTS"
}
FAULT_POINTS="$tmp/fault-points"
trap finish EXIT
set -e

go build -o "$TESTSUM" ./internal/tools/testsum

# gotest runs go test with its arguments through testsum.
gotest() { go test -json "$@" 2>&1 | "$TESTSUM" -tally "$TEST_TALLY"; }

IDEMPOTENCY_FAULT_POINTS_REPORT="$FAULT_POINTS" gotest -count=1 -timeout "$TEST_TIMEOUT" ./...
scripts/mod-why-pgstore.sh
scripts/newest-sdk.sh
scripts/previous-release.sh
for m in $CONTRIB_MODULES; do
	echo "== $m"
	(cd "$root/$m" && gotest -count=1 -timeout "$TEST_TIMEOUT" ./...)
done
# The TypeScript interceptor (typescript/): its own tests on the real
# PostgreSQL and the spec's vectors, counted in the closing line; its
# node_modules also serve the side-by-side test in integration/.
echo "== typescript (npm ci, npm test)"
npm_rc=0
(cd "$root/typescript" && npm ci --no-audit --no-fund --loglevel=error && npm test) 2>&1 | tee "$tmp/npm-test" || npm_rc=$?
awk -v tally="$TEST_TALLY" '
	/^# pass / { p = $3 } /^# fail / { f = $3 } /^# skipped / { s = $3 }
	END {
		if ((getline line < tally) > 0) { split(line, c, " ") } else { c[1] = c[2] = c[3] = 0 }
		close(tally)
		printf "%d %d %d\n", c[1] + p, c[2] + f, c[3] + s > tally
	}' "$tmp/npm-test"
[ "$npm_rc" = 0 ]
for m in $SERVER_MODULES; do
	echo "== $m (GOTOOLCHAIN=$SERVER_TOOLCHAIN)"
	(cd "$root/$m" && export GOTOOLCHAIN="$SERVER_TOOLCHAIN" && gotest -count=1 -timeout "$TEST_TIMEOUT" ./...)
done
