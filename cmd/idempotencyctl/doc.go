// Command idempotencyctl looks at and decides the records that
// github.com/tesserix/idempotency keeps in PostgreSQL or Redis.
//
// An EFFECTFUL activity whose outcome nobody can state leaves an
// indeterminate record under its key and stops the run with an
// IndeterminateOutcomeError that names the tenant and the key. Until a
// person decides, every duplicate of the key is refused. idempotencyctl is
// how an operator looks at such a record and applies the decision: the
// effect happened (record its outcome; duplicates receive it) or it did not
// (free the key; a retry may run it). It also erases a tenant's records,
// sweeps expired ones and prepares the store after installing or upgrading.
//
// # Usage
//
//	idempotencyctl -store postgres|redis [store flags] <command> [command flags]
//
// The store flags go before or after the command:
//
//	-store         postgres or redis (or $IDEMPOTENCY_STORE); required
//	-postgres-url  PostgreSQL connection URL (or $IDEMPOTENCY_POSTGRES_URL)
//	-schema        schema of the table (or $IDEMPOTENCY_SCHEMA); defaults to pgstore.DefaultSchema
//	-table         the table (or $IDEMPOTENCY_TABLE); defaults to pgstore.DefaultTable
//	-portable      pgstore's portable mode, for Citus, YugabyteDB, CockroachDB
//	-redis-addr    Redis host:port (or $IDEMPOTENCY_REDIS_ADDR)
//	-prefix        Redis key prefix (or $IDEMPOTENCY_PREFIX); defaults to redisstore.DefaultPrefix
//	-timeout       give up on the store (and on Temporal) after this long; defaults to 10s
//
// Use the schema, table or prefix the workers use. The environment
// variables are never printed: a URL may hold a password.
//
// # Commands
//
//	schema                                       prepare the store: PostgreSQL table, Redis layout (idempotent)
//	list    (-tenant T | -all-tenants) [-state S,S] [-stale] [-older-than D]
//	        [-oldest] [-limit N] [-cursor C] [-json | -keys]
//	                                             list what waits for a person
//	show    -tenant T -key K [-json]             print one record
//	resolve -tenant T -key K (-outcome JSON | -free -yes) [-by WHO] [-reason R]
//	        [-reference REF] [-dry-run] [-force] [Temporal flags]
//	                                             decide an indeterminate or stale record in the store
//	decide  -tenant T -key K (-outcome JSON | -free -yes | -retry | -fail) -by WHO
//	        [-reason R] [-reference REF] [-workflow-id W [-run-id R]] [Temporal flags]
//	                                             send the decision to the waiting workflow
//	forget  -tenant T -yes [-force]              erase every record of a tenant
//	sweep   [-limit N]                           delete expired records
//
// Every command takes -h. -key takes a key as the dispatcher derives it:
// "v1:" (or, derived under a secret, "k1:") and 64 lower-case hex digits,
// as the indeterminate error and the pending query print it.
//
// schema prepares the store, and is safe to run again and while workers
// run: with PostgreSQL it creates the schema, table, indexes and commit
// guard, and adds newer columns (pgstore's EnsureSchema); with Redis it
// converts records of earlier layouts and prints how many (redisstore's
// Migrate). Run it once every worker runs the new version.
//
// list prints a tenant's live records as a table: tenant, key, state
// ("pending (stale)" when the holder's lease has run out), age, activity,
// workflow ID, reason and who decided. With neither -state nor -stale it
// lists what waits for a person: indeterminate records and stale pending
// ones. -state takes pending, indeterminate, completed or all; -older-than
// keeps records claimed at least that long ago; newest first, or -oldest.
// One page of -limit records (default 100, at most 1000); the last line
// gives the -cursor that continues. -keys prints only the keys, for
// scripts. An empty listing exits 0 and names other tenants that have
// matching records. -all-tenants reads across tenants, for operators only.
// -json prints {"records": [...], "next": "..."}, each record as show -json.
//
// show prints the record: state, holder, token, lease, expiry, times, the
// reason it is indeterminate, the execution that made it (workflow, run,
// activity, attempt; or the Nexus operation or standalone activity), who
// decided it and why, its retention window, whether it keeps a check digest
// (never the values), and its outcome decoded with the SDK's default data
// converter as JSON (an outcome written through a payload codec shows its
// size and encoding instead). -json prints the same as one object (tenant,
// key, state, holder, token, lease_until, expires_at, created_at,
// updated_at, reason, workflow_id, run_id, activity_type, activity_id,
// attempt, resolution, outcome, outcome_decoded, outcome_bytes,
// outcome_encoding, retention_seconds, check).
//
// resolve applies one decision in the store. -outcome takes the activity's
// result as JSON ('"12A"' for a string, '{"seat":"12A"}' for a struct, null
// for none), recorded with the default data converter (a worker with a
// payload codec records its decisions through store.Resolve and
// interceptor.EncodeOutcome instead). -free frees the key, and needs -yes:
// if the effect did happen, it happens twice. -dry-run shows and changes
// nothing. -by, -reason and -reference are kept in the record's
// resolution. The decision applies only to the record shown (fenced by its
// token). A stale pending record (its holder's lease ran out by the store's
// clock) is settled the same way, in one step; a pending record within its
// lease is refused. resolve refuses while the record's workflow waits on the
// key (use decide; -force resolves anyway, and the workflow then takes
// decide -retry).
//
// decide hands the decision to the workflow that waits on the key (with
// interceptor.Options.AwaitDecision) as the idempotency.decide Update: it
// reads the record, takes the workflow from its origin (or -workflow-id and
// -run-id) and follows a reset to the run that waits now. -outcome, -free,
// -retry and -fail are the actions complete, free, retry and fail; -retry
// suits a record already settled with resolve; -free on an indeterminate
// record needs -yes, as above. It prints what the workflow answered; a
// decision the workflow rejects prints its reason and exits 1. Where no
// workflow waits, it says so and points to resolve; a decision rejected
// because another was taken first points to show.
//
// decide (and resolve's check for a waiting workflow) connects to Temporal
// as the temporal CLI does, through go.temporal.io/sdk/contrib/envconfig: a
// profile of the CLI's TOML configuration file, then the CLI's environment
// variables, then the flags, each over the one before. An operator whose
// temporal CLI reaches the cluster needs no flag.
//
//	-config-file                    the configuration file ($TEMPORAL_CONFIG_FILE; default temporalio/temporal.toml in os.UserConfigDir)
//	-profile                        its profile ($TEMPORAL_PROFILE; default "default")
//	-address                        host:port of the frontend ($TEMPORAL_ADDRESS; default 127.0.0.1:7233)
//	-namespace                      the workflow's namespace ($TEMPORAL_NAMESPACE; default "default")
//	-api-key                        API key; implies TLS ($TEMPORAL_API_KEY)
//	-tls                            use TLS; -tls=false refuses it ($TEMPORAL_TLS)
//	-tls-cert-path, -tls-key-path   client certificate and key, for mTLS ($TEMPORAL_TLS_CLIENT_CERT_PATH, $TEMPORAL_TLS_CLIENT_KEY_PATH)
//	-tls-ca-path                    CA of the server's certificate ($TEMPORAL_TLS_SERVER_CA_CERT_PATH)
//	-tls-server-name                name expected in the server's certificate ($TEMPORAL_TLS_SERVER_NAME)
//	-tls-disable-host-verification  accept any server name ($TEMPORAL_TLS_DISABLE_HOST_VERIFICATION)
//
// A profile may also give gRPC metadata and an authority, and the CLI's
// _DATA variables apply. A named profile the file lacks, or a file that
// cannot be read, is a usage error. $TEMPORAL_TLS_CERT, $TEMPORAL_TLS_KEY
// and $TEMPORAL_TLS_CA are read as a fallback where the CLI's names are
// unset. A profile's codec is not used: decisions go with the default data
// converter.
//
// forget erases every record of the tenant, and refuses without -yes.
// Without -force it refuses while any record of the tenant is held or
// indeterminate, looking in the records themselves (on Redis, a scan of the
// tenant's keys), since erasing them lets their calls run again.
//
// sweep deletes records whose retention window has passed, in batches of
// -limit. Expired records already read as free; sweeping reclaims space.
//
// The workers' store options need no flag but -portable: every command finds
// the records it guards whatever they are (docs/OPERATING.md).
//
// # Exit status
//
//	0  done, or help was asked for
//	1  refused or failed: no record, a record that is not indeterminate,
//	   a decision the workflow rejected, no workflow waiting, the store or
//	   Temporal unreachable or timed out
//	2  usage error: an unknown command or flag, a required flag missing,
//	   a -key that is not a key, two decisions at once, JSON that does not
//	   parse, forget without -yes, a configuration file or profile that
//	   cannot be read; nothing was contacted
//
// Errors go to stderr, one line each.
//
// # Examples
//
//	idempotencyctl -store postgres -postgres-url "$DATABASE_URL" schema
//	export IDEMPOTENCY_STORE=postgres IDEMPOTENCY_POSTGRES_URL="$DATABASE_URL"
//	idempotencyctl list -tenant acme -oldest
//	idempotencyctl show -tenant acme -key v1:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//
// The airline confirms seat 12A was booked: record it, so the retry receives
// it instead of booking again; or the charge never reached the bank: free
// the key:
//
//	idempotencyctl resolve -tenant acme -key v1:9f86… -outcome '{"seat":"12A"}' -by ops@acme
//	idempotencyctl resolve -tenant acme -key v1:9f86… -free -yes -by ops@acme
//
// When the workflow waits on the key (AwaitDecision), hand it the decision:
//
//	export TEMPORAL_PROFILE=prod
//	idempotencyctl decide -tenant acme -key v1:9f86… -outcome '{"seat":"12A"}' \
//	    -by ops@acme -reason "airline confirmed by phone" -reference TICKET-7
//
// Erase a departed tenant, and reclaim expired records (Redis):
//
//	idempotencyctl -store redis -redis-addr 10.0.0.5:6379 forget -tenant acme -yes
//	idempotencyctl -store redis -redis-addr 10.0.0.5:6379 sweep
package main
