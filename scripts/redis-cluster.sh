#!/usr/bin/env bash
# A throwaway Redis Cluster on loopback: three masters, each with one
# replica, for the tests and CI. Never touches the shared Redis on 6379.
#
#   scripts/redis-cluster.sh start DIR [WATCH_PID]
#       Starts six redis-server nodes (--cluster-enabled yes) on free ports,
#       each in DIR/PORT/, joins them with `redis-cli --cluster create
#       --cluster-replicas 1`, waits until every node reports cluster_state:ok
#       and every replica is linked to its master, and prints the six addresses (comma-separated) on stdout. With
#       WATCH_PID, a watchdog kills every node once that process is gone, so a
#       test that dies leaves no servers behind.
#   scripts/redis-cluster.sh kill DIR PORT      SIGKILL one node.
#   scripts/redis-cluster.sh restart DIR PORT   Start a killed node again on its
#       own directory and cluster config (it rejoins; a demoted master comes
#       back as a replica).
#   scripts/redis-cluster.sh stop DIR           SIGKILL every node and the watchdog.
#
# Environment: REDIS_CLUSTER_NODE_TIMEOUT (ms, default 1000) is how long the
# cluster waits before it fails a silent master over to its replica;
# REDIS_CLUSTER_APPENDONLY (yes/no, default no) turns on AOF on every node.
set -euo pipefail

redis_server=${REDIS_SERVER:-redis-server}
redis_cli=${REDIS_CLI:-redis-cli}
node_timeout=${REDIS_CLUSTER_NODE_TIMEOUT:-1000}
appendonly=${REDIS_CLUSTER_APPENDONLY:-no}

die() { echo "redis-cluster: $*" >&2; exit 1; }

port_free() { # port_free PORT: nothing listens on PORT nor on its bus port.
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null &&
		! (exec 3<>"/dev/tcp/127.0.0.1/$(($1 + 10000))") 2>/dev/null
}

# start_node DIR PORT: start (or start again) the node of PORT in DIR/PORT.
start_node() {
	local dir=$1 port=$2
	mkdir -p "$dir/$port"
	"$redis_server" --port "$port" --bind 127.0.0.1 --protected-mode no \
		--cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf" \
		--cluster-node-timeout "$node_timeout" \
		--save "" --appendonly "$appendonly" --dir "$dir/$port" \
		--logfile "$dir/$port/redis.log" --daemonize no \
		>/dev/null 2>&1 </dev/null &
	echo $! >"$dir/$port/pid"
}

answers() { [ "$("$redis_cli" -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

wait_answers() {
	local port=$1
	for _ in $(seq 1 200); do
		answers "$port" && return 0
		sleep 0.05
	done
	return 1
}

alive() { # alive PID: running, not a zombie waiting to be reaped
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

kill_nodes() { # kill_nodes DIR PORT...: SIGKILL the nodes, then wait for them all
	local dir=$1 port pids=()
	shift
	for port in "$@"; do
		[ -f "$dir/$port/pid" ] || continue
		pids+=("$(cat "$dir/$port/pid")")
		kill -9 "${pids[-1]}" 2>/dev/null || true
		rm -f "$dir/$port/pid"
	done
	for pid in "${pids[@]}"; do
		while alive "$pid"; do sleep 0.02; done
	done
}

kill_node() { kill_nodes "$1" "$2"; }

stop_all() {
	local dir=$1
	if [ -f "$dir/watchdog.pid" ]; then
		kill -9 "$(cat "$dir/watchdog.pid")" 2>/dev/null || true
		rm -f "$dir/watchdog.pid"
	fi
	[ -f "$dir/ports" ] || return 0
	# shellcheck disable=SC2046
	kill_nodes "$dir" $(cat "$dir/ports")
}

cluster_ok() { # every node answers and agrees the cluster is up
	local dir=$1 port
	for port in $(cat "$dir/ports"); do
		"$redis_cli" -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
	done
}

replicas_linked() { # every master has its replica online, every replica its link up
	local dir=$1 port info
	for port in $(cat "$dir/ports"); do
		info=$("$redis_cli" -h 127.0.0.1 -p "$port" info replication 2>/dev/null | tr -d '\r')
		case $info in
		*role:master*) grep -q '^slave0:.*state=online' <<<"$info" || return 1 ;;
		*role:slave*) grep -q '^master_link_status:up' <<<"$info" || return 1 ;;
		*) return 1 ;;
		esac
	done
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 start|kill|restart|stop DIR [PORT|WATCH_PID]"
command -v "$redis_server" >/dev/null || die "$redis_server not found (scripts/services.sh installs it)"
command -v "$redis_cli" >/dev/null || die "$redis_cli not found (scripts/services.sh installs it)"

case $cmd in
start)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[ ! -f "$dir/ports" ] || die "$dir already holds a cluster"
	ports=()
	for _ in $(seq 1 200); do
		[ ${#ports[@]} -lt 6 ] || break
		p=$((20000 + RANDOM % 30000))
		case " ${ports[*]} " in *" $p "* | *" $((p + 10000)) "* | *" $((p - 10000)) "*) continue ;; esac
		port_free "$p" || continue
		start_node "$dir" "$p"
		if wait_answers "$p"; then
			ports+=("$p")
			echo "${ports[*]}" >"$dir/ports"
		else
			kill_node "$dir" "$p" # Lost a race for the port: try another.
			rm -rf "${dir:?}/$p"
		fi
	done
	[ ${#ports[@]} -eq 6 ] || { stop_all "$dir"; die "could not start six nodes"; }
	if [ -n "${3:-}" ]; then
		watched=$3
		(
			trap '' HUP
			while kill -0 "$watched" 2>/dev/null; do sleep 1; done
			for port in $(cat "$dir/ports"); do
				[ -f "$dir/$port/pid" ] && kill -9 "$(cat "$dir/$port/pid")" 2>/dev/null
			done
		) >/dev/null 2>&1 </dev/null &
		echo $! >"$dir/watchdog.pid"
	fi
	addrs=()
	for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
	if ! "$redis_cli" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1; then
		stop_all "$dir"
		die "redis-cli --cluster create failed: $(tail -n 5 "$dir/create.log")"
	fi
	for _ in $(seq 1 300); do
		cluster_ok "$dir" && break
		sleep 0.05
	done
	cluster_ok "$dir" || { stop_all "$dir"; die "the cluster did not reach cluster_state:ok"; }
	for _ in $(seq 1 300); do
		replicas_linked "$dir" && break
		sleep 0.05
	done
	replicas_linked "$dir" || { stop_all "$dir"; die "the replicas did not link up with their masters"; }
	(IFS=,; echo "${addrs[*]}")
	;;
kill)
	[ -n "${3:-}" ] || die "usage: $0 kill DIR PORT"
	kill_node "$dir" "$3"
	;;
restart)
	[ -n "${3:-}" ] || die "usage: $0 restart DIR PORT"
	kill_node "$dir" "$3"
	start_node "$dir" "$3"
	wait_answers "$3" || die "node $3 did not answer after a restart"
	;;
stop)
	stop_all "$dir"
	;;
*)
	die "unknown command $cmd"
	;;
esac
