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
// The store flags come before the command:
//
//	-store         postgres or redis (or $IDEMPOTENCY_STORE); required
//	-postgres-url  PostgreSQL connection URL (or $IDEMPOTENCY_POSTGRES_URL)
//	-schema        schema of the table; defaults to pgstore.DefaultSchema
//	-table         the table; defaults to pgstore.DefaultTable
//	-portable      pgstore's portable mode, for Citus, YugabyteDB, CockroachDB
//	-redis-addr    Redis host:port (or $IDEMPOTENCY_REDIS_ADDR)
//	-prefix        Redis key prefix; defaults to redisstore.DefaultPrefix
//	-timeout       give up on the store after this long; defaults to 10s
//
// Use the schema, table or prefix the workers use. The environment
// variables stand in for flags left unset, and are never printed: a URL may
// hold a password.
//
// # Commands
//
//	schema                                       prepare the store: PostgreSQL table, Redis layout (idempotent)
//	list    (-tenant T | -all-tenants) [-state S,S] [-stale] [-older-than D]
//	        [-oldest] [-limit N] [-cursor C] [-json]
//	                                             list what waits for a person
//	show    -tenant T -key K [-json]             print one record
//	resolve -tenant T -key K (-outcome JSON | -free) [-by WHO] [-reason R]
//	        [-reference REF] [-dry-run]
//	                                             decide an indeterminate or stale record
//	decide  -tenant T -key K (-outcome JSON | -free -yes | -retry | -fail) -by WHO
//	        [-reason R] [-reference REF] [Temporal flags]
//	                                             send the decision to the waiting workflow
//	forget  -tenant T -yes                       erase every record of a tenant
//	sweep   [-limit N]                           delete expired records
//
// Every command takes -h. -key takes a key as the dispatcher derives it:
// "v1:" (or, derived under a secret, "k1:") and 64 lower-case hex digits,
// as the indeterminate error and the
// workflow's pending query print it; anything else is a usage error that
// says so, rather than a record reported missing.
//
// schema prepares the store, and is safe to run again and while workers
// run. With PostgreSQL it creates the schema, table and indexes when
// missing and adds the columns of newer versions (pgstore's EnsureSchema).
// With Redis it converts the records of earlier layouts to the current one
// and indexes them for list (redisstore's Migrate), and prints how many it
// migrated; the store reads old records until then, but Sweep, list and
// the backlog see only the indexed ones. Run it once every worker runs the
// new version (docs/COMPATIBILITY.md says why not before).
//
// list prints a tenant's live records as a table: tenant, key, state
// ("pending (stale)" for a pending record whose lease has run out), age
// since the claim, activity, workflow ID, reason (of an indeterminate
// record, or of the decision that completed one) and who decided. With
// neither -state nor -stale it lists what waits for a person: indeterminate
// records and stale pending ones. -state takes pending, indeterminate,
// completed or all, separated by commas; -stale keeps, of the pending
// records, those whose holder's lease ran out by the store's clock;
// -older-than keeps records claimed at least that long ago. Newest first,
// or oldest first with -oldest. One page of -limit records (default 100,
// at most 1000) is printed; when more remain, the last line gives the
// -cursor that continues the listing (with the same -tenant and -oldest).
// An empty listing says so, and exits 0. -all-tenants lists every tenant:
// it reads across the tenant boundary, and is for operators only. With
// -json it prints one object, {"records": [...], "next": "..."}, each
// record as show -json prints it.
//
// show prints the record's tenant, key, state, holder, fencing token,
// lease, expiry, creation and update times, the reason it is indeterminate,
// the execution whose claim stands in the record (workflow ID, run ID,
// activity type, activity ID and attempt; "-" for a record written before
// records kept them), who decided a record a person resolved (action,
// by, when, reason, reference), the retention window it keeps (its
// activity's own, or the store's), whether it keeps a digest of checked
// arguments (never their values), and its outcome, decoded with the SDK's default data converter and
// printed as JSON. An outcome written through a payload codec (encryption,
// compression) cannot be decoded here; show gives its size and encoding
// instead. With -json it prints one JSON object with the fields tenant,
// key, state, holder, token, lease_until, expires_at, created_at,
// updated_at (RFC 3339, UTC, or null), reason, workflow_id, run_id,
// activity_type, activity_id, attempt (empty strings and 0 when the record
// does not name them), resolution (null, or an object with action, by,
// reason, reference and at), outcome (the decoded value,
// or null), outcome_decoded, outcome_bytes, outcome_encoding,
// retention_seconds (0: the store's window) and check ("" for none).
//
// resolve prints the record's state, then applies exactly one decision.
// -outcome takes the activity's result as JSON ("12A" for a string,
// {"seat":"12A"} for a struct, null for none) and records it as the
// dispatcher records a result, with the default data converter; a worker
// that uses a payload codec must record its outcomes another way.
// A bare word is not JSON: -outcome 14C is refused with the spelling that
// works, -outcome '"14C"'.
// -free frees the key. -dry-run shows what would be done and changes
// nothing. -by, -reason and -reference are kept in the record's
// resolution (show and list print them). The decision applies only to the
// indeterminate record shown: a key claimed and marked again meanwhile is
// refused, to be looked at again.
//
// resolve also settles a stale pending record: one whose holder let its
// lease run out by the store's clock, such as a worker that died with the
// store down after its effect landed. It is one store call bound to the
// token of the record shown (store.ResolveParams.Stale): the store checks,
// by its own clock, that this claim is still pending with its lease run
// out and records the outcome or frees the key in the same step, trail
// included, so a duplicate arriving meanwhile sees the stale claim or the
// decision, never a claim taken over or a record marked indeterminate and
// waiting on a decision already being made. It then prints the holder and
// its origin. The record keeps its holder and origin; the old holder,
// should it come back, is fenced off (its writes fail). A pending record
// within its holder's lease is refused: the holder may still be running.
//
// resolve changes the store only. A workflow waiting on the key (with
// AwaitDecision) is woken by decide, which also records the outcome; after
// a resolve, decide -retry lets it answer from the record.
//
// decide hands the decision to the workflow that waits on the key (one
// whose worker runs with interceptor.Options.AwaitDecision). It reads the
// record, takes the workflow ID and run ID from the record's origin (or
// from -workflow-id and -run-id, for a record that does not name them),
// and sends the decision as the idempotency.decide Workflow Update, with
// -by (required), -reason and -reference for the workflow's log. The
// workflow validates the decision before applying it: -outcome must decode
// into what the activity returns. -outcome, -free, -retry and -fail are
// the actions complete, free, retry and fail; -retry suits a record
// already settled with resolve. -free on an indeterminate record (or one
// gone, named by -workflow-id) needs -yes, as forget does: the activity
// runs again, and if its effect did happen it happens a second time (two
// charges); without -yes decide shows the record, says so and exits 1
// before reaching Temporal. decide prints the record's state, the
// decision it sends, and what the workflow answered (recorded, freed,
// retried or failed). A decision the workflow rejects prints its reason
// and exits 1, changing nothing. Where no workflow waits on the key — the
// workflow ended, or it runs on without waiting (it does not use
// AwaitDecision) — decide says so, exits 1 and points to resolve; a
// decision rejected because another was taken first points to show, as
// there is nothing left to do. A
// completed record takes only -retry or -fail; a pending one is not
// decided (its holder may be running).
//
// decide connects to Temporal as the temporal CLI does, through the SDK's
// own loader (go.temporal.io/sdk/contrib/envconfig): a profile of the CLI's
// TOML configuration file, then the CLI's environment variables, then the
// flags, each over the one before; what none of them gives takes the
// default. An operator whose temporal CLI reaches the cluster reaches it
// with decide, with no flag.
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
// A profile holds the same settings (address, namespace, api_key, and under
// tls: client_cert_path, client_key_path, server_ca_cert_path or the
// certificates inline, server_name, disable_host_verification, disabled),
// and may add gRPC metadata (grpc_meta) and an authority; the CLI's
// variables for those apply too ($TEMPORAL_TLS_CLIENT_CERT_DATA and the
// other _DATA names, $TEMPORAL_GRPC_META_*, $TEMPORAL_CLIENT_AUTHORITY). A
// profile named with -profile or $TEMPORAL_PROFILE must be in the file: a
// missing one, or a file that cannot be read or parsed, is a usage error
// naming the profile and the file, and so is a -config-file that does not
// exist. When none is named, the default profile applies if the file has
// one, and nothing if there is no file ($TEMPORAL_CONFIG_FILE naming none
// included, as with the temporal CLI). A variable
// set to the empty string counts as unset. A profile's codec is not used:
// decide sends the decision with the default data converter.
//
// The variables idempotencyctl read before it followed the temporal CLI,
// $TEMPORAL_TLS_CERT, $TEMPORAL_TLS_KEY and $TEMPORAL_TLS_CA, are still
// read as a fallback: each applies where the CLI's variables for the same
// file (path or data) are unset, over the profile and under the flags. New
// setups should use the CLI's names.
//
// Any TLS setting or an API key turns TLS on; -tls=false, $TEMPORAL_TLS=false
// or the profile's tls.disabled turns it off (-tls=false beside another -tls
// flag or -api-key is refused). A flag that names a certificate file
// replaces what the profile gave inline for it. -timeout bounds the whole
// command, the wait for the workflow's answer included: a workflow whose
// worker is down does not answer, and decide says so. Errors name the
// profile and file the settings came from.
//
// forget erases every record of the tenant outright, indeterminate records
// awaiting a decision included, and prints how many it erased. The records
// cannot be counted without erasing them, so it refuses to run without
// -yes. Without -force it refuses while any record of the tenant is held or
// indeterminate; it looks for them in the records themselves, trusting no
// index (on Redis, redisstore's ListByScan: a claim of a worker with
// IndexOnlyWhatWaits is in no index during its first lease).
//
// sweep deletes every record whose retention window has passed, in batches
// of -limit, and prints how many. Expired records already read as free;
// sweeping only reclaims their space.
//
// The workers' store options need no flag but -portable: the command finds
// every record it guards whatever they are. On Redis, once a worker with
// IndexOnlyWhatWaits has claimed under the prefix (redisstore marks it),
// list and sweep walk every record key (SCAN) rather than the age index, so
// they see the claims the option leaves out of it, at the cost of a walk of
// the keyspace per page or sweep. ReplicaAcks, and pgstore's Batch, change
// only how workers claim: show, decide and resolve read a record by its key
// whatever the options.
//
// Records hold a digest of an activity's key arguments, never the
// arguments; nothing this command prints can reveal them.
//
// # Exit status
//
//	0  done, or help was asked for
//	1  refused or failed: no record, a record that is not indeterminate,
//	   a decision the workflow rejected, no workflow waiting, the store or
//	   Temporal unreachable or timed out
//	2  usage error: unknown command or flag, a required flag missing,
//	   a -key that is not a key, two decisions at once, JSON that does
//	   not parse, forget without -yes, a TLS
//	   file, a Temporal configuration file or a profile that cannot be
//	   read; nothing was contacted
//
// Errors go to stderr, one line each.
//
// # Examples
//
// Create the table once per deployment, and again after upgrading (it adds
// the columns and indexes of newer versions); with Redis, schema migrates
// the records of earlier layouts:
//
//	idempotencyctl -store postgres -postgres-url "$DATABASE_URL" schema
//
// See what waits for a person, longest-waiting first:
//
//	idempotencyctl list -tenant acme -oldest
//
// Look at the key an IndeterminateOutcomeError named:
//
//	export IDEMPOTENCY_STORE=postgres IDEMPOTENCY_POSTGRES_URL="$DATABASE_URL"
//	idempotencyctl show -tenant acme -key v1:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//
// The airline confirms seat 12A was booked: record that, so the retry
// receives it instead of booking again:
//
//	idempotencyctl resolve -tenant acme -key v1:9f86… -outcome '{"seat":"12A"}'
//
// The charge never reached the bank: free the key, so a retry may charge:
//
//	idempotencyctl resolve -tenant acme -key v1:9f86… -free -yes
//
// Or, when the workflow waits on the key (AwaitDecision), hand it the
// decision; it records the outcome and the call returns it:
//
//	export TEMPORAL_PROFILE=prod   # the temporal CLI's profile; or TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE
//	idempotencyctl decide -tenant acme -key v1:9f86… -outcome '{"seat":"12A"}' \
//	    -by ops@acme -reason "airline confirmed by phone" -reference TICKET-7
//
// Erase a departed tenant, and reclaim expired records (Redis):
//
//	idempotencyctl -store redis -redis-addr 10.0.0.5:6379 forget -tenant acme -yes
//	idempotencyctl -store redis -redis-addr 10.0.0.5:6379 sweep
package main
