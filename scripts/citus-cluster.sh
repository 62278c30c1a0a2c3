#!/usr/bin/env bash
# A throwaway Citus cluster on loopback: a coordinator and two worker nodes,
# each a PostgreSQL 15 of its own with citus preloaded, for the tests and CI.
# Never touches the shared PostgreSQL on 5432. Citus must be installed
# (scripts/citus-build.sh).
#
#   scripts/citus-cluster.sh start DIR [WATCH_PID]
#       Makes three data directories under DIR (initdb, trust on loopback),
#       starts them on free loopback ports, creates the database and the citus
#       extension on each, registers the coordinator
#       (citus_set_coordinator_host) and the two workers (citus_add_node), and
#       prints the coordinator's URL on stdout. With WATCH_PID, a watchdog
#       stops every node once that process is gone, so a run that dies leaves
#       no servers behind.
#   scripts/citus-cluster.sh stop DIR   Stops every node and the watchdog.
#
# Run as root, the nodes run as the postgres user (initdb refuses root), and
# DIR is handed to it. Environment: CITUS_DB (default citus) is the database;
# CITUS_SHARD_COUNT (default 8) is citus.shard_count, the shards a distributed
# table is cut into (Citus's own default is 32: fewer keep the suites' many
# small tables quick to create, and 8 still spreads every table over both
# workers); CITUS_FSYNC (default off) is fsync and synchronous_commit.
set -euo pipefail

pg_bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
db=${CITUS_DB:-citus}
shard_count=${CITUS_SHARD_COUNT:-8}
fsync=${CITUS_FSYNC:-off}

die() { echo "citus-cluster: $*" >&2; exit 1; }

# as_pg runs a command as the user the nodes run as.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

psql_at() { # psql_at PORT DB SQL
	"$pg_bin/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$2" -Atqc "$3"
}

start_node() { # start_node DIR NAME PORT
	local dir=$1 name=$2 port=$3
	as_pg "$pg_bin/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
}

stop_all() {
	local dir=$1 name
	if [ -f "$dir/watchdog.pid" ]; then
		kill "$(cat "$dir/watchdog.pid")" 2>/dev/null || true
		rm -f "$dir/watchdog.pid"
	fi
	for name in coordinator worker1 worker2; do
		[ -f "$dir/$name/postmaster.pid" ] || continue
		as_pg "$pg_bin/pg_ctl" -D "$dir/$name" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
	done
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 start|stop DIR [WATCH_PID]"

case $cmd in
start)
	[ -x "$pg_bin/initdb" ] || die "no PostgreSQL at $pg_bin (PG_BIN names another)"
	[ -f "$("$pg_bin/pg_config" --pkglibdir)/citus.so" ] || die "citus is not installed (scripts/citus-build.sh builds it)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ ! -f "$dir/ports" ] || die "$dir already holds a cluster"
	if [ "$(id -u)" = 0 ]; then
		chown postgres "$dir"
		# The postgres user must reach DIR through its parents.
		p=$dir
		while [ "$p" != / ]; do
			p=$(dirname "$p")
			chmod o+x "$p" 2>/dev/null || true
		done
	fi
	ports=()
	for name in coordinator worker1 worker2; do
		as_pg "$pg_bin/initdb" -D "$dir/$name" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/$name.initdb.log" 2>&1 ||
			{ stop_all "$dir"; die "initdb $name failed: $(tail -n 5 "$dir/$name.initdb.log")"; }
		cat >>"$dir/$name/postgresql.conf" <<-EOF
			shared_preload_libraries = 'citus'
			max_connections = 300
			shared_buffers = 64MB
			fsync = $fsync
			synchronous_commit = $fsync
			full_page_writes = $fsync
			max_prepared_transactions = 200
			citus.shard_count = $shard_count
			log_min_messages = warning
			log_min_error_statement = panic
		EOF
		started=
		for _ in $(seq 1 50); do
			p=$((20000 + RANDOM % 30000))
			case " ${ports[*]} " in *" $p "*) continue ;; esac
			port_free "$p" || continue
			if start_node "$dir" "$name" "$p"; then
				started=$p
				break
			fi
		done
		[ -n "$started" ] || { stop_all "$dir"; die "could not start $name: $(tail -n 5 "$dir/$name.log")"; }
		ports+=("$started")
		echo "${ports[*]}" >"$dir/ports"
	done
	if [ -n "${3:-}" ]; then
		watched=$3
		(
			trap '' HUP
			while kill -0 "$watched" 2>/dev/null; do sleep 1; done
			stop_all "$dir"
		) >/dev/null 2>&1 </dev/null &
		echo $! >"$dir/watchdog.pid"
	fi
	for port in "${ports[@]}"; do
		psql_at "$port" postgres "CREATE DATABASE $db" >/dev/null
		psql_at "$port" "$db" "CREATE EXTENSION citus" >/dev/null
	done
	psql_at "${ports[0]}" "$db" "SELECT citus_set_coordinator_host('127.0.0.1', ${ports[0]})" >/dev/null
	for port in "${ports[@]:1}"; do
		psql_at "${ports[0]}" "$db" "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
	done
	n=$(psql_at "${ports[0]}" "$db" "SELECT count(*) FROM citus_get_active_worker_nodes()")
	[ "$n" = 2 ] || { stop_all "$dir"; die "the coordinator sees $n active workers, not 2"; }
	echo "postgres://postgres@127.0.0.1:${ports[0]}/$db?sslmode=disable"
	;;
stop)
	stop_all "$dir"
	;;
*)
	die "unknown command $cmd"
	;;
esac
