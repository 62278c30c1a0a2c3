package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// action is a parsed command, ready to run against an open store.
type action func(ctx context.Context, b *backend, out io.Writer) error

// command is one subcommand: its flags, its help and what it does.
type command struct {
	name     string
	summary  string
	synopsis string // the flags, after the command's name
	detail   string // what it does, for -h
	// flags defines the command's flags on fs and returns a function that
	// checks them, once parsed, and builds the action. env reads the
	// environment; it is consulted only by the returned function, never for
	// help, which must not print what the environment holds.
	flags func(fs *flag.FlagSet, env func(string) string) func() (action, error)
}

// commands lists the subcommands in the order help shows them.
var commands = []command{
	{
		name:    "schema",
		summary: "prepare the store after installing or upgrading (idempotent)",
		detail: "PostgreSQL: creates the schema, table and indexes the store uses when they\n" +
			"are missing, and adds the columns of newer versions to an existing table.\n" +
			"Redis: converts the records of earlier layouts to the current one and\n" +
			"indexes them for list (redisstore's Migrate); run it once every worker\n" +
			"runs the new version. Safe to run again, and while workers run.",
		flags: schemaFlags,
	},
	{
		name:     "list",
		summary:  "list what waits for a person (or any records), one page at a time",
		synopsis: "(-tenant T | -all-tenants) [-state S,S] [-stale] [-older-than D] [-oldest] [-limit N] [-cursor C] [-json | -keys]",
		detail: "Lists a tenant's live records as a table: tenant, key, state, age,\n" +
			"activity, workflow ID, reason and who decided. With neither -state nor\n" +
			"-stale it lists what waits for a person: indeterminate records, and\n" +
			"pending ones whose holder let its lease run out (stale). -stale alone\n" +
			"lists the stale pending records. Newest first unless -oldest; a full\n" +
			"page ends with the -cursor that continues it. -all-tenants reads across\n" +
			"tenants and is for operators only. An empty answer says so; exit 0.\n" +
			"On Redis, once a worker with IndexOnlyWhatWaits has claimed under the\n" +
			"prefix, each page walks every record key (SCAN) to see the claims no index\n" +
			"holds: complete, and as slow as the keyspace is large.",
		flags: listFlags,
	},
	{
		name:     "show",
		summary:  "print one record",
		synopsis: "-tenant T -key K [-json]",
		detail:   "Prints the record kept under the key: its state, holder, fencing token,\ntimes, the reason it is indeterminate, the workflow, run, activity and\nattempt whose claim stands in it, and its outcome decoded with the\ndefault data converter. Exits 1 when the key has no live record.",
		flags:    showFlags,
	},
	{
		name:     "decide",
		summary:  "send a decision to the workflow waiting on an indeterminate record",
		synopsis: "-tenant T -key K (-outcome JSON | -free -yes | -retry | -fail) -by WHO [-reason R] [-reference REF] [Temporal flags]",
		detail: "Reads the record, finds the workflow that made it (its origin), and sends\n" +
			"the decision as the " + decision.UpdateName + " Workflow Update, which the workflow\n" +
			"validates before applying. Prints what the workflow answered.\n" +
			"  -outcome JSON  the effect happened: JSON is what the activity returned\n" +
			"  -free          the effect did not happen: the activity runs again (-yes\n" +
			"                 confirms it: had the effect happened, it happens twice)\n" +
			"  -retry         settled already (resolve): the activity answers from the record\n" +
			"  -fail          give up: the waiting call fails with the indeterminate error\n" +
			"Exits 1 when the workflow rejects the decision (with its reason) or no\n" +
			"workflow waits on the key (it ended, or does not use AwaitDecision): then\n" +
			"settle the record with resolve.\n" +
			"Temporal is reached as the temporal CLI reaches it: a profile of its\n" +
			"configuration file (-profile, -config-file), then its environment\n" +
			"variables, then the flags, each over the one before. The older\n" +
			"$TEMPORAL_TLS_CERT, $TEMPORAL_TLS_KEY and $TEMPORAL_TLS_CA are still read\n" +
			"where the CLI's names for those files are unset.",
		flags: decideFlags,
	},
	{
		name:     "resolve",
		summary:  "decide an indeterminate or stale record in the store: record its outcome, or free its key",
		synopsis: "-tenant T -key K (-outcome JSON | -free -yes) [-by WHO] [-reason R] [-reference REF] [-dry-run]",
		detail: "Applies a person's decision to an indeterminate record.\n" +
			"  -outcome JSON  the effect happened: record JSON as the activity's result;\n" +
			"                 duplicates of the key receive it (\"12A\" for a string,\n" +
			"                 {\"seat\":\"12A\"} for a struct, null for no result).\n" +
			"  -free -yes     the effect did not happen: free the key; the next attempt\n" +
			"                 may run it (-yes confirms: if it did happen, it happens twice).\n" +
			"A stale pending record (its holder let its lease run out: it is gone)\n" +
			"is settled the same way, in one step bound to the record shown: the store\n" +
			"records the decision only if that claim is still pending with its lease\n" +
			"run out; the old holder, should it return, is fenced off.\n" +
			"Prints the record's state first. Exits 1 when there is no record, it is\ncompleted, or it is pending within its holder's lease.\n" +
			"Changes only the store: a workflow waiting on the key (AwaitDecision)\nis woken by decide, or by decide -retry after resolve.",
		flags: resolveFlags,
	},
	{
		name:     "forget",
		summary:  "erase every record of a tenant (needs -yes)",
		synopsis: "-tenant T -yes [-force]",
		detail: "Erases every record of the tenant outright, in every state. It cannot be\nundone: -yes is required.\n" +
			"It refuses, naming them, while any record of the tenant is held (a call's\nbody may be running: its duplicates would run it again beside it) or\n" +
			"indeterminate (a workflow may wait on it for a person: the call would run\nagain without anybody deciding whether its effect happened). It looks at\n" +
			"the records themselves, whatever the workers' store options (on Redis it\nscans the tenant's keys: an index may not list a new claim).\n" +
			"-force erases them anyway, for an erasure the law requires; its cost: every\ncall of the tenant made again after it — a retry, a duplicate, a running\n" +
			"workflow's next call, a decision's rerun — finds its key free and runs its\neffect a second time. Completed records are erased without refusal, at the\n" +
			"same cost for workflows of the tenant still running: stop the tenant's\nworkers (or let its workflows finish) first. A claim made between the check\nand the erasure is erased too.",
		flags: forgetFlags,
	},
	{
		name:     "sweep",
		summary:  "delete records whose retention window has passed",
		synopsis: "[-limit N]",
		detail: "Deletes expired records, in batches, and prints how many. Expired records\nalready read as free; sweeping only reclaims their space. On Redis, once a\n" +
			"worker with IndexOnlyWhatWaits has claimed under the prefix, it also walks\nevery record key for the expired records no index holds.",
		flags: sweepFlags,
	},
}

func lookupCommand(n string) (command, bool) {
	for _, c := range commands {
		if c.name == n {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func (c command) flagSet(env func(string) string) (*flag.FlagSet, func() (action, error)) {
	fs := flag.NewFlagSet(name+" "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, c.flags(fs, env)
}

// parse parses the command's flags and returns its action, a usage error,
// or flag.ErrHelp. storeFlags defines the store flags on the command's flag
// set, so that they may come after the command too.
func (c command) parse(args []string, env func(string) string, storeFlags func(*flag.FlagSet)) (action, error) {
	fs, build := c.flagSet(env)
	storeFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%s: %v (see %s %s -h)", c.name, err, name, c.name)
	}
	if fs.NArg() > 0 {
		return nil, usagef("%s: unexpected argument %q: flags go before it, and the command takes no arguments (see %s %s -h)",
			c.name, fs.Arg(0), name, c.name)
	}
	act, err := build()
	if err != nil {
		return nil, usagef("%s: %v", c.name, err)
	}
	return act, nil
}

func (c command) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s [store flags] %s %s\n\n%s\n", name, c.name, c.synopsis, c.detail)
	fs, _ := c.flagSet(func(string) string { return "" })
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	fmt.Fprintf(w, "\nThe store flags may come before or after the command: run '%s -h' for them.\n", name)
}

// scopeFlags defines -tenant and -key.
func scopeFlags(fs *flag.FlagSet) (tenant, key *string) {
	return fs.String("tenant", "", "the tenant the record belongs to (required)"),
		fs.String("key", "", "the idempotency key, as the indeterminate error reports it (required)")
}

func checkScope(tenant, key string) error {
	switch {
	case tenant == "":
		return errors.New("-tenant is required")
	case key == "":
		return errors.New("-key is required")
	}
	if err := (store.LookupParams{Tenant: tenant, Key: key}).Validate(); err != nil {
		return err
	}
	if _, err := keyspace.ParseKey(key); err != nil {
		// Every key the dispatcher writes is a keyspace key: anything else
		// is a copying mistake, not a record that is missing.
		return fmt.Errorf("-key %s is not an idempotency key: a key is %q (or %q) and 64 lower-case hex digits, as the indeterminate error and the workflow's pending query print it (%v)",
			strconv.Quote(key), keyspace.Version+":", keyspace.KeyedVersion+":", err)
	}
	return nil
}

func schemaFlags(_ *flag.FlagSet, _ func(string) string) func() (action, error) {
	return func() (action, error) {
		return func(ctx context.Context, b *backend, out io.Writer) error {
			switch {
			case b.ensureSchema != nil:
				if err := b.ensureSchema(ctx); err != nil {
					return err
				}
				fmt.Fprintf(out, "schema ready: %s and its indexes exist\n", b.where)
			case b.migrate != nil:
				n, err := b.migrate(ctx)
				if err != nil {
					return partial(n, "migrated", "record", err)
				}
				fmt.Fprintf(out, "layout ready under %s: migrated %d %s of earlier layouts\n", b.where, n, plural(n, "record"))
			default:
				return errors.New("this store has nothing to prepare")
			}
			return nil
		}, nil
	}
}

func showFlags(fs *flag.FlagSet, _ func(string) string) func() (action, error) {
	tenant, key := scopeFlags(fs)
	asJSON := fs.Bool("json", false, "print the record as one JSON object")
	return func() (action, error) {
		if err := checkScope(*tenant, *key); err != nil {
			return nil, err
		}
		return func(ctx context.Context, b *backend, out io.Writer) error {
			rec, err := lookup(ctx, b, *tenant, *key)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeRecordJSON(out, rec)
			}
			writeRecord(out, rec)
			return nil
		}, nil
	}
}

// outcomeError explains an -outcome that is not one JSON value. The most
// common mistake, a bare word where a JSON string was meant (-outcome 14C
// for the seat "14C"), gets the exact spelling that works.
func outcomeError(text string, err error) error {
	if bareWords(text) {
		quoted, _ := json.Marshal(strings.TrimSpace(text))
		return fmt.Errorf("-outcome %s is not one JSON value; a JSON string needs quotes: -outcome '%s'", strconv.Quote(text), quoted)
	}
	return fmt.Errorf("-outcome is not one JSON value: %v", err)
}

// bareWords reports whether text looks like words typed without the quotes
// JSON needs: no JSON structure at all, and a word that is no JSON value.
func bareWords(text string) bool {
	if strings.ContainsAny(text, "{}[]\"") {
		return false
	}
	for _, w := range strings.Fields(text) {
		if !json.Valid([]byte(w)) {
			return true
		}
	}
	return false
}

// reasonSuffix gives the reason of an indeterminate record; a record
// settled since may still carry it, and it no longer applies.
func reasonSuffix(rec store.Record) string {
	if rec.Reason == "" || rec.State != store.StateIndeterminate {
		return ""
	}
	return " (reason: " + printable(rec.Reason) + ")"
}

func forgetFlags(fs *flag.FlagSet, _ func(string) string) func() (action, error) {
	tenant := fs.String("tenant", "", "the tenant whose records are erased (required)")
	yes := fs.Bool("yes", false, "confirm: erase every record of the tenant, which cannot be undone")
	force := fs.Bool("force", false, "erase held and indeterminate records too: their calls, made again, run their effects a second time")
	return func() (action, error) {
		if *tenant == "" {
			return nil, errors.New("-tenant is required")
		}
		if err := (store.ForgetParams{Tenant: *tenant}).Validate(); err != nil {
			return nil, err
		}
		if !*yes {
			return nil, fmt.Errorf("refusing to erase tenant %s without -yes: every record of the tenant, indeterminate ones awaiting a decision included, is deleted outright and cannot be counted beforehand or restored", printable(*tenant))
		}
		return func(ctx context.Context, b *backend, out io.Writer) error {
			if !*force {
				if err := refuseLive(ctx, b, *tenant); err != nil {
					return err
				}
			}
			n, err := b.Forget(ctx, store.ForgetParams{Tenant: *tenant})
			if err != nil {
				return partial(n, "erased", "record", err)
			}
			fmt.Fprintf(out, "erased %d %s of tenant %s\n", n, plural(n, "record"), printable(*tenant))
			return nil
		}, nil
	}
}

// refuseLive refuses to forget a tenant while any of its records is held or
// indeterminate, naming up to ten of them and how many there are. It looks
// with b.listEvery where the store has one: on Redis, the age index that
// List reads leaves out the claims of workers with IndexOnlyWhatWaits
// until they are renewed (issue 43), and a guard that trusted it let
// forget erase a running claim.
func refuseLive(ctx context.Context, b *backend, tenant string) error {
	const shown = 10
	var keys []string
	total := 0
	params := store.ListParams{Tenant: tenant, States: []store.State{store.StatePending, store.StateIndeterminate}, Limit: 500}
	list := b.List
	if b.listEvery != nil {
		list = b.listEvery
	}
	for {
		page, err := list(ctx, params)
		if err != nil {
			return fmt.Errorf("listing the tenant's held and indeterminate records before erasing: %w", err)
		}
		for _, rec := range page.Records {
			total++
			if len(keys) < shown {
				keys = append(keys, fmt.Sprintf("%s (%s)", printable(rec.Key), rec.State))
			}
		}
		if page.Next == "" {
			break
		}
		params.Cursor = page.Next
	}
	if total == 0 {
		return nil
	}
	more := ""
	if total > len(keys) {
		more = fmt.Sprintf(", and %d more", total-len(keys))
	}
	are := "records are"
	if total == 1 {
		are = "record is"
	}
	return fmt.Errorf("refusing to erase tenant %s: %d %s held or waiting for a decision, whose calls would run their effects again: %s%s; "+
		"settle them first (decide, resolve), or stop the tenant's workers, or pass -force to erase them anyway",
		printable(tenant), total, are, strings.Join(keys, ", "), more)
}

func sweepFlags(fs *flag.FlagSet, _ func(string) string) func() (action, error) {
	limit := fs.Int("limit", store.DefaultSweepLimit, "delete at most this many records per batch")
	return func() (action, error) {
		if *limit <= 0 {
			return nil, fmt.Errorf("-limit must be positive, got %d", *limit)
		}
		return func(ctx context.Context, b *backend, out io.Writer) error {
			n, err := store.Sweep(ctx, b, *limit)
			if err != nil {
				return partial(n, "swept", "expired record", err)
			}
			fmt.Fprintf(out, "swept %d expired %s from %s\n", n, plural(n, "record"), b.where)
			return nil
		}, nil
	}
}

// partial reports an error that stopped a command after it had already
// deleted n records.
func partial(n int, did, what string, err error) error {
	if n == 0 {
		return err
	}
	return fmt.Errorf("%s %d %s, then: %w", did, n, plural(n, what), err)
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// lookup reads the live record, turning ErrNotFound into a message that
// says so plainly.
func lookup(ctx context.Context, b *backend, tenant, key string) (store.Record, error) {
	rec, err := b.Lookup(ctx, store.LookupParams{Tenant: tenant, Key: key})
	if errors.Is(err, store.ErrNotFound) {
		return rec, noRecord(b, tenant, key)
	}
	return rec, err
}

// noRecord says plainly that the key has no live record, and where the
// command looked.
func noRecord(b *backend, tenant, key string) error {
	return fmt.Errorf("no record: tenant %s has no live record under key %s in %s (never claimed, freed, forgotten or expired; or the workers use another store, table or prefix)",
		printable(tenant), printable(key), b.where)
}
