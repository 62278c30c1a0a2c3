package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
)

// Exit statuses.
const (
	exitOK     = 0 // done, or help was asked for
	exitFailed = 1 // refused by the store, no record, or the store failed
	exitUsage  = 2 // the command line is wrong; nothing was contacted
)

// Environment variables that stand in for store flags left unset. The
// examples (examples/booking, examples/quickstart) read the same ones, with
// the same defaults, so the three agree on where the records are.
const (
	envStore       = "IDEMPOTENCY_STORE"
	envPostgresURL = "IDEMPOTENCY_POSTGRES_URL"
	envSchema      = "IDEMPOTENCY_SCHEMA"
	envTable       = "IDEMPOTENCY_TABLE"
	envRedisAddr   = "IDEMPOTENCY_REDIS_ADDR"
	envPrefix      = "IDEMPOTENCY_PREFIX"
)

// The defaults of the store settings, the same in the examples: the local
// PostgreSQL and Redis that "make services" starts, pgstore's table and
// redisstore's prefix.
const (
	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultRedisAddr   = "127.0.0.1:6379"
)

const (
	storePostgres = "postgres"
	storeRedis    = "redis"
)

const defaultTimeout = 10 * time.Second

const name = "idempotencyctl"

func main() {
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it parses args, opens the store the global flags
// name, runs one subcommand and returns the exit status. Output goes to
// stdout, errors to stderr, one line each.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, getenv: os.Getenv, open: openBackend}
	return c.run(ctx, args)
}

// cli holds what run depends on, so tests can replace the environment and
// hand in a store that is already open.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	open           func(context.Context, config) (*backend, error)
}

// config is what the global flags (and the environment) say.
type config struct {
	store       string
	postgresURL string
	schema      string
	table       string
	redisAddr   string
	prefix      string
	portable    bool
	timeout     time.Duration
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func (c *cli) run(ctx context.Context, args []string) int {
	cfg, rest, err := c.parseGlobal(args)
	if errors.Is(err, flag.ErrHelp) {
		c.globalUsage(c.stdout)
		return exitOK
	}
	if err != nil {
		return c.fail(err)
	}
	if len(rest) == 0 {
		return c.fail(usagef("no command given: want one of %s (see %s -h)", commandNames(), name))
	}
	if rest[0] == "help" {
		c.globalUsage(c.stdout)
		return exitOK
	}
	cmd, ok := lookupCommand(rest[0])
	if !ok {
		return c.fail(usagef("unknown command %q: want one of %s (see %s -h)", rest[0], commandNames(), name))
	}
	act, err := cmd.parse(rest[1:], c.getenv, func(fs *flag.FlagSet) { bindStoreFlags(fs, &cfg) })
	if errors.Is(err, flag.ErrHelp) {
		cmd.usage(c.stdout)
		return exitOK
	}
	if err != nil {
		return c.fail(err)
	}
	if err := c.completeConfig(&cfg); err != nil {
		return c.fail(err)
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	b, err := c.open(ctx, cfg)
	if err != nil {
		return c.fail(err)
	}
	defer b.close()
	if err := act(ctx, b, c.stdout); err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			err = fmt.Errorf("%w (gave up after -timeout %v)", err, cfg.timeout)
		case errors.Is(err, pgstore.ErrNoSchema):
			err = fmt.Errorf("%w (check -schema and -table; '%s schema' creates the table)", err, name)
		}
		return c.fail(fmt.Errorf("%s: %w", cmd.name, err))
	}
	return exitOK
}

// fail prints err on one line of stderr and returns its exit status.
func (c *cli) fail(err error) int {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
	var u *usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFailed
}

func (c *cli) globalFlags(cfg *config) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.timeout = defaultTimeout
	bindStoreFlags(fs, cfg)
	return fs
}

// bindStoreFlags defines the store flags on fs, each defaulting to what cfg
// holds: empty before the command, what was given there after it. So the
// store flags may come before the command or after it.
func bindStoreFlags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&cfg.store, "store", cfg.store, "the store: postgres or redis (or $"+envStore+")")
	fs.StringVar(&cfg.postgresURL, "postgres-url", cfg.postgresURL, "PostgreSQL connection URL, for -store postgres (or $"+envPostgresURL+`; default "`+defaultPostgresURL+`")`)
	fs.StringVar(&cfg.schema, "schema", cfg.schema, "PostgreSQL schema holding the table (or $"+envSchema+`; default "`+pgstore.DefaultSchema+`")`)
	fs.StringVar(&cfg.table, "table", cfg.table, "PostgreSQL table holding the records (or $"+envTable+`; default "`+pgstore.DefaultTable+`")`)
	fs.BoolVar(&cfg.portable, "portable", cfg.portable, "run pgstore in its portable mode, as workers on Citus, YugabyteDB or CockroachDB do (pgstore.Capabilities{})")
	fs.StringVar(&cfg.redisAddr, "redis-addr", cfg.redisAddr, "Redis address host:port, for -store redis (or $"+envRedisAddr+`; default "`+defaultRedisAddr+`")`)
	fs.StringVar(&cfg.prefix, "prefix", cfg.prefix, "Redis key prefix the workers use (or $"+envPrefix+`; default "`+redisstore.DefaultPrefix+`")`)
	fs.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "give up on the store, and on Temporal (decide), after this long")
}

// parseGlobal parses the flags before the command. Values that may come
// from the environment are filled in later, by completeConfig, so that a
// help text never prints them (a URL may hold a password).
func (c *cli) parseGlobal(args []string) (config, []string, error) {
	var cfg config
	fs := c.globalFlags(&cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, nil, err
		}
		return cfg, nil, usagef("%v (see %s -h)", err, name)
	}
	return cfg, fs.Args(), nil
}

// completeConfig fills unset flags from the environment, then from the
// defaults, and checks that the store is named.
func (c *cli) completeConfig(cfg *config) error {
	for _, f := range []struct {
		v        *string
		env, def string
	}{
		{&cfg.store, envStore, ""},
		{&cfg.postgresURL, envPostgresURL, defaultPostgresURL},
		{&cfg.schema, envSchema, pgstore.DefaultSchema},
		{&cfg.table, envTable, pgstore.DefaultTable},
		{&cfg.redisAddr, envRedisAddr, defaultRedisAddr},
		{&cfg.prefix, envPrefix, redisstore.DefaultPrefix},
	} {
		*f.v = cmp.Or(*f.v, c.getenv(f.env), f.def)
	}
	if cfg.timeout <= 0 {
		return usagef("-timeout must be positive, got %v", cfg.timeout)
	}
	switch cfg.store {
	case "":
		return usagef("no store given: pass -store postgres or -store redis (or set $%s)", envStore)
	case storePostgres, storeRedis:
	default:
		return usagef("unknown store %q: want postgres or redis", cfg.store)
	}
	return nil
}

func (c *cli) globalUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %[1]s -store postgres|redis [store flags] <command> [command flags]

Looks at and decides the records github.com/tesserix/idempotency keeps, for
the person who must settle an effect whose outcome is unknown.

Commands:
`, name)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, "\nStore flags (before or after the command; the examples take the same):\n")
	var cfg config
	fs := c.globalFlags(&cfg)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, `
Run '%[1]s <command> -h' for a command's flags.
Exit status: 0 done; 1 refused, no record, or the store failed; 2 usage error.
`, name)
}
