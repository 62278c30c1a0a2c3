package faultrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/pgstore"
)

// loadTenant is the tenant every workflow of a round runs under: on Citus,
// the tenant whose shard holds every record of the round.
const loadTenant = "faultrun"

// citusCluster is a running Citus cluster the round is given
// (Config.CitusURL, its coordinator), not one it starts: scripts/
// citus-cluster.sh starts one on loopback. The round's store is a table
// of its own, made by EnsureSchema (distributed by tenant) and dropped at
// the end; the workers run pgstore in the mode DetectCapabilities answers
// there. A "restart" stops one node the hard way (pg_ctl stop -m
// immediate on its data directory) and starts it again: for
// StoreCitusWorker the worker node holding the shard of the round's tenant
// (every record of the round), for StoreCitusCoordinator the coordinator.
// The nodes must run on this machine, their data directories readable.
type citusCluster struct {
	url   string // the coordinator's, as the workers are given it
	table string
	node  citusNode
	// pgCtl and asUser run pg_ctl as the nodes' owner.
	pgCtl   string
	asUser  []string
	stopped bool
}

// citusNode is the node a restart stops, as it reports itself.
type citusNode struct {
	role                         string // "coordinator" or "worker"
	hostport                     string
	data, port, sockets, listens string
}

// newCitusCluster makes the round's table on the cluster whose coordinator
// rawURL names and finds the node a restart stops.
func newCitusCluster(ctx context.Context, rawURL string, coordinator bool) (*citusCluster, error) {
	if rawURL == "" {
		return nil, errors.New("faultrun: a Citus round needs Config.CitusURL, the coordinator of a running cluster (scripts/citus-cluster.sh starts one)")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("faultrun: Config.CitusURL: %w", err)
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "2")
		u.RawQuery = q.Encode()
	}
	pgCtl, err := findPostgresBinary("pg_ctl")
	if err != nil {
		return nil, err
	}
	c := &citusCluster{url: u.String(), table: fmt.Sprintf("faultrun_%d", time.Now().UnixNano()), pgCtl: pgCtl}
	if os.Geteuid() == 0 {
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	pool, err := pgxpool.New(ctx, c.url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	engine, caps, err := pgstore.DetectCapabilities(ctx, pool)
	if err != nil {
		return nil, err
	}
	if engine != pgstore.EngineCitus {
		return nil, fmt.Errorf("faultrun: Config.CitusURL dials %s, not Citus", engine)
	}
	if err := requireSynchronousCommit(ctx, pool, u); err != nil {
		return nil, err
	}
	s, err := pgstore.New(pool, pgstore.Options{Table: c.table, Capabilities: &caps})
	if err != nil {
		return nil, err
	}
	err = s.EnsureSchema(ctx)
	s.Close()
	if err != nil {
		return nil, err
	}
	c.node = citusNode{role: "coordinator", hostport: u.Host}
	if !coordinator {
		var host string
		var port int
		err := pool.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_shard_placement
WHERE shardid = get_shard_id_for_distribution_column($1::regclass, $2::text)`,
			pgx.Identifier{pgstore.DefaultSchema, c.table}.Sanitize(), loadTenant).Scan(&host, &port)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("faultrun: the worker node holding tenant %q: %w", loadTenant, err)
		}
		c.node = citusNode{role: "worker", hostport: net.JoinHostPort(host, strconv.Itoa(port))}
	}
	if err := c.node.read(ctx, u); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// requireSynchronousCommit refuses a cluster with synchronous_commit off
// on a node: there a commit is acknowledged before its WAL is written, and
// an immediate stop loses the last ones — completed records vanish, and a
// key is charged twice, outside the promise (as a Redis without
// persistence). scripts/test-citus.sh turns it on before the round.
func requireSynchronousCommit(ctx context.Context, pool *pgxpool.Pool, coordinator *url.URL) error {
	rows, err := pool.Query(ctx, "SELECT nodename, nodeport FROM pg_dist_node WHERE isactive ORDER BY groupid")
	if err != nil {
		return err
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var host string
		var port int
		err := r.Scan(&host, &port)
		return net.JoinHostPort(host, strconv.Itoa(port)), err
	})
	if err != nil {
		return err
	}
	for _, hp := range append([]string{coordinator.Host}, nodes...) {
		u := *coordinator
		u.Host = hp
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			return fmt.Errorf("faultrun: the Citus node at %s: %w", hp, err)
		}
		var sc string
		err = conn.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&sc)
		_ = conn.Close(ctx)
		if err != nil {
			return fmt.Errorf("faultrun: the Citus node at %s: %w", hp, err)
		}
		if sc == "off" {
			return fmt.Errorf("%w: the Citus node at %s runs with synchronous_commit off: an immediate stop loses commits it acknowledged, outside the promise (ALTER SYSTEM SET synchronous_commit = on; SELECT pg_reload_conf())",
				ErrNotDurable, hp)
		}
	}
	return nil
}

// ErrNotDurable matches the error Run returns when a Citus round's
// cluster would lose acknowledged commits when a node stops.
var ErrNotDurable = errors.New("faultrun: the Citus cluster does not keep what it acknowledged")

// read asks the node where its data directory is and how it was started.
func (n *citusNode) read(ctx context.Context, coordinator *url.URL) error {
	u := *coordinator
	u.Host = n.hostport
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("faultrun: the %s node at %s: %w", n.role, n.hostport, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, s := range []struct {
		name string
		into *string
	}{{"data_directory", &n.data}, {"port", &n.port}, {"unix_socket_directories", &n.sockets}, {"listen_addresses", &n.listens}} {
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", s.name).Scan(s.into); err != nil {
			return fmt.Errorf("faultrun: the %s node at %s: %s: %w", n.role, n.hostport, s.name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(n.data, "PG_VERSION")); err != nil {
		return fmt.Errorf("faultrun: the %s node at %s keeps its data in %s, not on this machine (the round stops and starts it with pg_ctl): %w",
			n.role, n.hostport, n.data, err)
	}
	return nil
}

func (c *citusCluster) pgctl(args ...string) (string, error) {
	out, err := runAs(c.asUser, c.pgCtl, args...)
	if err != nil {
		return out, fmt.Errorf("faultrun: pg_ctl %s on the %s node (%s): %w\n%s", args[len(args)-1], c.node.role, c.node.data, err, out)
	}
	return out, nil
}

func (c *citusCluster) addr() string { return c.url }

// endpoint and via serve Config.Network, which a Citus round refuses.
func (c *citusCluster) endpoint() string { return c.node.hostport }
func (c *citusCluster) via(string) string {
	return c.url
}

// kill stops the node the hard way: no checkpoint, its connections cut;
// its next start runs crash recovery.
func (c *citusCluster) kill() error {
	if _, err := c.pgctl("-D", c.node.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		return err
	}
	c.stopped = true
	return nil
}

// start starts the node again as it ran: its port, socket directories and
// listen addresses; its log beside its data directory.
func (c *citusCluster) start() error {
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=%s", c.node.port, c.node.sockets, c.node.listens)
	if _, err := c.pgctl("-D", c.node.data, "-l", strings.TrimSuffix(c.node.data, "/")+".log", "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return err
	}
	c.stopped = false
	return nil
}

// describe names the node a restart stops, for the round's log.
func (c *citusCluster) describe() string {
	return fmt.Sprintf("the %s node at %s (%s)", c.node.role, c.node.hostport, c.node.data)
}

// close leaves the cluster as the round found it: the node running, the
// round's tables dropped.
func (c *citusCluster) close() {
	if c.stopped {
		_ = c.start()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(ctx) }()
	_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{pgstore.DefaultSchema, c.table}.Sanitize()+", "+
		pgx.Identifier{pgstore.DefaultSchema, c.table + "_txguard"}.Sanitize())
}

// runAs runs name with args as asUser (a runuser prefix, or none).
func runAs(asUser []string, name string, args ...string) (string, error) {
	argv := append(append(append([]string(nil), asUser...), name), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}
