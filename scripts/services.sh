#!/usr/bin/env bash
# Makes sure the services the tests talk to answer on 127.0.0.1: PostgreSQL
# on 5432 (user postgres, database test, trust auth) and Redis on 6379.
# Installs Debian's packages when they are missing and starts what is down.
# Safe to run again: it changes nothing where everything already answers.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=0
need_pkg() { # need_pkg COMMAND PACKAGE...
	command -v "$1" >/dev/null 2>&1 && return 0
	if [ "$apt_updated" = 0 ]; then
		as_root apt-get update -qq
		apt_updated=1
	fi
	shift
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_answers() { pg_isready -q -h 127.0.0.1 -p 5432 >/dev/null 2>&1; }
redis_answers() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }

# PostgreSQL
need_pkg pg_isready postgresql postgresql-client
if ! pg_answers; then
	version=$(ls /etc/postgresql | sort -V | tail -n 1)
	as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
	for _ in $(seq 1 30); do pg_answers && break; sleep 1; done
fi
pg_answers || { echo "services: PostgreSQL does not answer on 127.0.0.1:5432" >&2; exit 1; }
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
	# A fresh Debian cluster asks for passwords over TCP: trust loopback.
	version=$(ls /etc/postgresql | sort -V | tail -n 1)
	hba=/etc/postgresql/$version/main/pg_hba.conf
	as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
	as_root runuser -u postgres -- psql -Atqc 'select pg_reload_conf()' >/dev/null
	sleep 1
fi
if [ "$(psql -h 127.0.0.1 -U postgres -d postgres -Atqc "select 1 from pg_database where datname = 'test'")" != 1 ]; then
	psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test' >/dev/null
fi

# Redis
need_pkg redis-server redis-server redis-tools
# redis-cli also starts the test Cluster (scripts/redis-cluster.sh).
need_pkg redis-cli redis-tools
if ! redis_answers; then
	as_root redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
	for _ in $(seq 1 30); do redis_answers && break; sleep 1; done
fi
redis_answers || { echo "services: Redis does not answer on 127.0.0.1:6379" >&2; exit 1; }
echo "services: PostgreSQL and Redis answer on 127.0.0.1"
