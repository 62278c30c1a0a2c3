#!/usr/bin/env bash
# Builds and installs Citus (a distributed PostgreSQL extension) into the
# machine's PostgreSQL 15 from the source kept beside the project:
# ../shared/third_party/citus/citus-13.2.2.tar.gz relative to the repository
# root (CITUS_TARBALL names another). No Debian package of Citus exists, so the
# Citus suite (make test-citus) builds it here. Skips everything when citus.so
# is already in PostgreSQL's library directory.
#
# Installs Debian's build packages first (postgresql-server-dev-15 and the
# libraries Citus links). On two cores the build takes several minutes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
tarball=${CITUS_TARBALL:-$root/../shared/third_party/citus/citus-13.2.2.tar.gz}

die() { echo "citus-build: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

pkglibdir() { "$pg_bin/pg_config" --pkglibdir 2>/dev/null; }
if [ -x "$pg_bin/pg_config" ] && [ -f "$(pkglibdir)/citus.so" ]; then
	echo "citus-build: $(pkglibdir)/citus.so is installed"
	exit 0
fi

[ -f "$tarball" ] || die "no Citus source at $tarball"
if ! dpkg -s postgresql-15 postgresql-server-dev-15 libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev make gcc >/dev/null 2>&1; then
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		postgresql-15 postgresql-server-dev-15 libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev make gcc >/dev/null
fi
[ -x "$pg_bin/pg_config" ] || die "no pg_config at $pg_bin (PG_BIN names another)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -f "$src/configure" ] || die "no configure in $tarball"

# PostgreSQL 15.20 declares have_createdb_privilege() extern in
# commands/dbcommands.h, and Citus defines a static one of the same name for the
# minors that lacked it: the compiler refuses the pair. Rename Citus's and let
# its callers reach it through a macro (an extern declaration after the static
# one then names the static function, which C allows).
compat=$src/src/include/pg_version_compat.h
if grep -q '^have_createdb_privilege(void)$' "$compat"; then
	perl -0pi -e 's/static inline bool\nhave_createdb_privilege\(void\)\n/#define have_createdb_privilege citus_have_createdb_privilege\nstatic inline bool\ncitus_have_createdb_privilege(void)\n/' "$compat"
	grep -q '^citus_have_createdb_privilege(void)$' "$compat" || die "could not rename have_createdb_privilege in $compat"
fi

jobs=$(nproc 2>/dev/null || echo 2)
echo "citus-build: building $(basename "$src") against $("$pg_bin/pg_config" --version) with $jobs jobs (several minutes)"
(
	cd "$src"
	./configure PG_CONFIG="$pg_bin/pg_config" >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log" >&2; exit 1; }
	make -j"$jobs" >"$work/make.log" 2>&1 || { grep -m 20 -B 2 -A 5 'error' "$work/make.log" >&2 || tail -n 40 "$work/make.log" >&2; exit 1; }
	as_root make install >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log" >&2; exit 1; }
) || die "the build failed"
[ -f "$(pkglibdir)/citus.so" ] || die "make install left no citus.so in $(pkglibdir)"
echo "citus-build: installed $(pkglibdir)/citus.so"
