#!/usr/bin/env bash
# Builds, vets and tests the library's own module on the newest Temporal Go
# SDK the module proxy serves (SDK_VERSION=v1.x.y picks another), in a
# throwaway copy: go.mod keeps the oldest SDK the library supports, so
# `make test` covers both ends. The modules that embed a Temporal server
# (integration/, the examples, benchmarks/) are left out: they stay on the
# SDK that server builds with.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${SDK_VERSION:-latest}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Tracked files and new ones not yet committed, without the server modules.
git ls-files -z --cached --others --exclude-standard -- . \
	':!integration' ':!examples' ':!benchmarks' |
	while IFS= read -r -d '' f; do
		[ -f "$f" ] && printf '%s\0' "$f"
	done | xargs -0 cp --parents -t "$dir"

cd "$dir"
go get "go.temporal.io/sdk@$version" >/dev/null 2>&1 || go get "go.temporal.io/sdk@$version"
go mod tidy >/dev/null
echo "== the library on $(go list -m go.temporal.io/sdk) ($(go list -m go.temporal.io/api))"
go vet ./...
if [ -n "${TESTSUM:-}" ]; then
	# make test: counted in its summary (scripts/test.sh).
	go test -json -count=1 -timeout "${TEST_TIMEOUT:-15m}" ./... 2>&1 | "$TESTSUM" -tally "$TEST_TALLY"
else
	go test -count=1 -timeout "${TEST_TIMEOUT:-15m}" ./...
fi
