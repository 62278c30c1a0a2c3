#!/usr/bin/env bash
# Replays every workflow history committed under integration/testdata/histories
# (those this release records included) with the PREVIOUS release's workflow
# code, under that release's own replay configurations (the router on and off,
# with and without the activities declared, another DefaultTenant): during a
# rolling deploy and after a rollback the previous release's workflow workers
# replay what this release's workers wrote. The previous release is built from
# its pinned commit in a throwaway directory (git archive), as the newest-SDK
# check builds a copy of the module.
#
# The histories of workflows that call Nexus operations
# (integration/testdata/nexus-histories) are replayed the same way: the
# previous release's suite has no workflow that calls one, so the file that
# defines it and its replay test (integration/nexus_replay_test.go, written
# against nothing the previous release lacks) is copied in with them.
#
# A history the previous release cannot replay, and why, is listed in
# integration/testdata/previous-release-unreplayable.txt ("file: reason"): a
# history of a behaviour this release writes only once switched on, or one the
# previous release already could not replay (its own list). Anything else that
# fails to replay is a rollback that would wedge workflows: the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# The previous release: v0.2.0, the code published before this release.
previous=${PREVIOUS_RELEASE:-f3c1635faee85c287eaa95f764c5d7d5e4ed3efa}
if ! git cat-file -e "$previous^{commit}" 2>/dev/null; then
	echo "previous-release: commit $previous is not in this clone's history (a shallow clone?): fetch it, or set PREVIOUS_RELEASE" >&2
	exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive "$previous" | tar -x -C "$dir"

histories=integration/testdata/histories
skip=integration/testdata/previous-release-unreplayable.txt
copied=0
for f in "$histories"/*.json; do
	name=$(basename "$f")
	if [ -f "$skip" ] && grep -q "^$name:" "$skip"; then
		rm -f "$dir/$histories/$name"
		continue
	fi
	if [ ! -f "$dir/$histories/$name" ]; then
		copied=$((copied + 1))
	fi
	cp "$f" "$dir/$histories/$name"
done
run='^TestReplayHistories$'
if [ -d integration/testdata/nexus-histories ]; then
	mkdir -p "$dir/integration/testdata/nexus-histories"
	cp integration/testdata/nexus-histories/*.json "$dir/integration/testdata/nexus-histories/"
	cp integration/nexus_replay_test.go "$dir/integration/"
	run='^(TestReplayHistories|TestReplayNexusHistories)$'
fi
echo "== the previous release (${previous:0:7}) replays this release's histories ($copied new since it, and the Nexus callers')"
cd "$dir/integration"
export GOTOOLCHAIN=${SERVER_TOOLCHAIN:-go1.27.3}
if [ -n "${TESTSUM:-}" ]; then
	# make test: counted in its summary (scripts/test.sh).
	go test -json -count=1 -timeout "${TEST_TIMEOUT:-15m}" -run "$run" ./ 2>&1 | "$TESTSUM" -tally "$TEST_TALLY"
else
	go test -count=1 -timeout "${TEST_TIMEOUT:-15m}" -run "$run" ./
fi
