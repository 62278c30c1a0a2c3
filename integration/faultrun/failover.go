package faultrun

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/idempotency/internal/netfault"
)

// DefaultFailoverDelay is Config.FailoverDelay's default.
const DefaultFailoverDelay = 200 * time.Millisecond

// postgresPair is a PostgreSQL primary and a standby made from it by
// pg_basebackup -R, streaming through a netfault proxy that delays what
// the primary sends (Config.FailoverDelay). The workers are given a
// multi-host URL with target_session_attrs=read-write. A "restart" of the
// store is a failover: the primary is killed and the standby promoted at
// once; the promoted standby runs alone for the rest of the round.
type postgresPair struct {
	primary, standby *privatePostgres
	link             *netfault.Proxy // standby → primary
	failedOver       bool
}

// newPostgresPair starts the pair, the primary with its commits waiting
// for the standby when synchronous, and waits until the standby streams.
func newPostgresPair(ctx context.Context, synchronous bool) (*postgresPair, error) {
	basebackup, err := findPostgresBinary("pg_basebackup")
	if err != nil {
		return nil, err
	}
	var extra []string
	if synchronous {
		extra = []string{"synchronous_standby_names='*'", "synchronous_commit=on"}
	}
	primary, err := newPrivatePostgres(extra...)
	if err != nil {
		return nil, err
	}
	p := &postgresPair{primary: primary}
	if p.link, err = netfault.Start(primary.endpoint()); err != nil {
		p.close()
		return nil, err
	}
	if p.standby, err = preparePrivatePostgres("cluster_name=standby1"); err != nil {
		p.close()
		return nil, err
	}
	host, port, _ := net.SplitHostPort(p.link.Addr())
	if out, err := p.standby.run(basebackup, "-D", p.standby.data(), "-h", host, "-p", port, "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		p.close()
		return nil, fmt.Errorf("faultrun: pg_basebackup: %w\n%s", err, out)
	}
	if err := p.standby.start(); err != nil {
		p.close()
		return nil, err
	}
	if err := p.waitCaughtUp(ctx); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// waitCaughtUp waits until the standby streams (as the synchronous one,
// when the primary names one) and has replayed everything the primary
// wrote.
func (p *postgresPair) waitCaughtUp(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, p.primary.addr())
	if err != nil {
		return err
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var ok bool
		err := pool.QueryRow(ctx, `SELECT coalesce(bool_and(state = 'streaming' AND replay_lsn >= pg_current_wal_lsn()
AND (current_setting('synchronous_standby_names') = '' OR sync_state IN ('sync', 'quorum'))), false) FROM pg_stat_replication`).Scan(&ok)
		if err == nil && ok {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("faultrun: the standby never caught up: %w", ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slow delays what the primary sends the standby by d.
func (p *postgresPair) slow(d time.Duration) { p.link.SetDelay(netfault.Down, d) }

func (p *postgresPair) addr() string {
	return fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&connect_timeout=2&target_session_attrs=read-write",
		p.primary.endpoint(), p.standby.endpoint())
}

// endpoint and via serve Config.Network, which a failover round refuses.
func (p *postgresPair) endpoint() string           { return p.primary.endpoint() }
func (p *postgresPair) via(hostport string) string { return p.primary.via(hostport) }

// kill is the failover: the primary stopped the hard way, the standby
// promoted at once, as a failover manager does once it declares the
// primary dead. What the replication link still held is lost.
func (p *postgresPair) kill() error {
	if p.failedOver {
		return fmt.Errorf("faultrun: the pair failed over already: one failover a round")
	}
	if err := p.primary.kill(); err != nil {
		return err
	}
	p.failedOver = true
	out, err := p.standby.run(p.standby.pgCtl, "-D", p.standby.data(), "-w", "-t", "60", "promote")
	if err != nil {
		return fmt.Errorf("faultrun: pg_ctl promote: %w\n%s", err, out)
	}
	return nil
}

// start does nothing: the promoted standby serves; the dead primary stays
// dead (it would need pg_rewind to follow the new one).
func (p *postgresPair) start() error { return nil }

func (p *postgresPair) close() {
	if p.link != nil {
		_ = p.link.Close()
	}
	if p.standby != nil {
		p.standby.close()
	}
	p.primary.close()
}
