#!/usr/bin/env bash
# Checks that a module importing only pgstore does not need go-redis: not
# for pgstore, not for pgstore's tests (go mod why counts the tests of the
# packages a module imports). Each store's tests pull only their own client
# (internal/testenv/pgenv, internal/testenv/redisenv); this keeps it so.
# It tidies through the module proxy the go command is configured with
# (GOPROXY, proxy.golang.org by default): tidy reads the go.mod files of
# modules the root module's build never fetches (pgx's pgpassfile requires
# an old testify, for one), so on a fresh machine an offline tidy fails
# with "module lookup disabled by GOPROXY=off". Once tidy has run, go mod
# why reads only the module cache.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go_version=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/go.mod")
cat >"$tmp/go.mod" <<MOD
module example.com/onlypgstore

go $go_version

require github.com/tesserix/idempotency v0.0.0

replace github.com/tesserix/idempotency => $root
MOD
cat >"$tmp/main.go" <<'GO'
package main

import _ "github.com/tesserix/idempotency/pgstore"

func main() {}
GO
cp "$root/go.sum" "$tmp/go.sum"

cd "$tmp"
GOFLAGS="${GOFLAGS:-} -mod=mod" go mod tidy >/dev/null
out=$(GOFLAGS="${GOFLAGS:-} -mod=mod" go mod why -m github.com/redis/go-redis/v9)
if ! grep -q 'does not need module github.com/redis/go-redis/v9' <<<"$out"; then
	echo "a module that imports only pgstore needs go-redis:" >&2
	echo "$out" >&2
	exit 1
fi
echo "ok: a module that imports only pgstore does not need go-redis"
