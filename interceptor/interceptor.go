package interceptor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// Scope chooses which identifier of the workflow scopes a key.
type Scope uint8

const (
	// ScopeRun scopes keys by the workflow run, as the specification
	// does: by the run ID a reset keeps (workflow.Info.OriginalRunID, see
	// wire.RunScopeChangeID), so a run made by a reset finds the records of
	// the run it was reset from. A workflow retry or a continue-as-new
	// starts a run of its own, and an activity repeated there is a new
	// key: its effect happens again.
	ScopeRun Scope = iota
	// ScopeWorkflow scopes keys by the workflow ID, so effects are not
	// repeated across runs of one workflow ID (resets, retries,
	// continue-as-new) within the retention window. The price: two
	// executions that reuse a workflow ID on purpose share keys too.
	ScopeWorkflow
	// ScopeFirstRun scopes keys by the first run of the workflow's chain
	// of runs (workflow.Info.FirstRunID): a workflow retry, a
	// continue-as-new, a cron run and a reset keep it, so an effect a
	// failed run completed is not repeated by the run that retries it —
	// but a new start of the same workflow ID begins a chain of its own,
	// with keys of its own. A workflow records at its first activity call
	// that it scopes so (see [wire.FirstRunScopeChangeID]), so switching the
	// option never moves a running workflow's keys.
	ScopeFirstRun
)

// String returns "run", "workflow" or "first-run".
func (s Scope) String() string {
	switch s {
	case ScopeWorkflow:
		return "workflow"
	case ScopeFirstRun:
		return "first-run"
	}
	return "run"
}

// Defaults applied by [New] to the zero fields of [Options].
const (
	// DefaultLease is Options.Lease's default.
	DefaultLease = 10 * time.Second
	// DefaultWaitHeartbeat is Options.WaitHeartbeat's default.
	DefaultWaitHeartbeat = 5 * time.Second
	// DefaultRecordAttempts is Options.RecordAttempts's default.
	DefaultRecordAttempts = 5
	// DefaultRecordBackoff is Options.RecordBackoff's default.
	DefaultRecordBackoff = 100 * time.Millisecond
	// DefaultStoreTimeout is Options.StoreTimeout's default.
	DefaultStoreTimeout = 10 * time.Second
	// DefaultOrphanRetry is Options.OrphanRetry's default.
	DefaultOrphanRetry = 5 * time.Minute
	// DefaultClaimRetry is Options.ClaimRetry's default.
	DefaultClaimRetry = 15 * time.Second
)

// The smallest non-zero values [New] accepts for the duration options, as
// the Options documentation gives them. Below them the dispatcher could not
// work as documented (a lease renewed every Lease/3 needs a tick the
// runtime can keep; a store call needs time to cross the network), so New
// refuses them, naming the field.
const (
	minLease           = 30 * time.Millisecond
	minWaitHeartbeat   = time.Millisecond
	minRecordBackoff   = time.Millisecond
	minStoreTimeout    = time.Millisecond
	minDecisionTimeout = time.Second
)

// Options configure the dispatcher. The zero value of each field but Store
// has a documented default. [New] refuses a Lease under 30 milliseconds, a
// WaitHeartbeat, RecordBackoff or StoreTimeout under a millisecond, and a
// DecisionTimeout under a second, naming the field.
type Options struct {
	// Store keeps the records. Required.
	Store store.Store
	// Tenant resolves the tenant of an execution. Left nil, the tenant is
	// the one [TenantPropagator] carries, as it is ([TenantFromHeader]).
	// A function given here is taken to map the header to a tenant of its
	// own — [TenantFromHeader] itself included — so the dispatcher never
	// assumes a record's tenant is the header's: a call run again after a
	// person's decision keeps the tenant the function resolves, and a call
	// that resolves none is told only that Tenant resolved none — with a
	// retryable [decision.ErrorTypeNoTenant] error, the body not entered:
	// the function is the worker's configuration, so the call blocks,
	// retried by its retry policy, until a redeployed worker's function
	// answers. (A call without a tenant in its header is refused
	// non-retryably: see DefaultTenant.)
	Tenant TenantFunc
	// DefaultTenant is the tenant of a workflow that carries none: started
	// from the temporal CLI, the Web UI, a schedule or another SDK, without
	// the [TenantHeader] header and without the [TenantMemo] memo. It is
	// also the tenant of a standalone activity (client.ExecuteActivity)
	// started without the header, when Tenant finds none. Set it only where
	// one worker serves one tenant; empty (the default) leaves such a
	// workflow or activity without a tenant, and every declared call in it
	// fails at once, non-retryable, with [decision.ErrorTypeNoTenant]. The value in
	// force when a workflow starts, empty included, is recorded in its
	// history (see [wire.TenantChangeID]), so changing it applies to new
	// workflows only. With NexusTenant nil it is also the tenant of every
	// Nexus request the worker's declared operations take.
	DefaultTenant string
	// NexusTenant resolves the tenant of a start request of a Nexus
	// operation declared with [NexusOperation], on the handler's side:
	// the tenant is the handler's decision, never the caller's. Left nil,
	// it is DefaultTenant when set, else the handler's namespace
	// ([NexusTenantFromNamespace]): every caller of the handler is then of
	// one tenant and shares its keys. A handler that serves several
	// tenants tells them apart by what the server sets, the endpoint a
	// request came through ([NexusTenantByEndpoint]); it honours the
	// [TenantHeader] header a caller writes only for the endpoints it
	// trusts ([NexusTenantFromHeader]). A request it resolves no tenant
	// for is refused, non-retryable, with [decision.ErrorTypeNoTenant].
	// The tenant is part of every key: changing what this resolves moves
	// the handler's keys, so a request retried across the change runs
	// again (docs/GUIDE.md, "Nexus operations").
	NexusTenant NexusTenantFunc
	// Scope chooses the run ID, the workflow ID or the first run of the
	// chain as the key's run. Defaults to [ScopeRun]. A standalone
	// activity's key is scoped by its activity ID whatever the Scope (see
	// [wire.StandaloneRun]).
	Scope Scope
	// Lease is how long a claim holds before a waiting duplicate may presume
	// its holder dead. The dispatcher renews it every third of its length
	// while the body runs, until the body returns — also past the
	// activity's start-to-close timeout, so a retry waits for a body that
	// outlived its attempt. A body whose renewals the store does not
	// acknowledge for four fifths of a lease (counted from when the last
	// acknowledged one was sent) has its context cancelled with
	// [ErrLeaseLapsed], before a duplicate may take the key over. Defaults
	// to 10 seconds ([DefaultLease]); see the package documentation for
	// sizing it.
	Lease time.Duration
	// WaitHeartbeat is how often an execution waiting for another holder
	// heartbeats; it is halved heartbeat timeout when the activity has a
	// shorter one. Defaults to 5 seconds ([DefaultWaitHeartbeat]).
	WaitHeartbeat time.Duration
	// RecordAttempts is how many times the dispatcher tries to record an
	// outcome before it gives up, returns the result anyway and reports the
	// claim orphaned. Defaults to 5 ([DefaultRecordAttempts]).
	RecordAttempts int
	// RecordBackoff is the pause before the second attempt to record an
	// outcome; it doubles after each. Defaults to 100 milliseconds
	// ([DefaultRecordBackoff]).
	RecordBackoff time.Duration
	// ClaimRetry is how long the dispatcher keeps retrying a store that
	// cannot be reached before the body runs (the claim, or the wait for
	// another holder), with backoff and heartbeats, counted from the first
	// failed call of each outage (a long wait for another holder does not
	// use it up), and never past the activity's own deadline. A claim
	// answered with a holder that is gone does not end an outage: a
	// takeover the store keeps taking back stays within one window. A
	// store that is down never reads as permission: when it stays down the
	// call ends, whatever its kind, with the retryable
	// IdempotencyStoreUnavailable error carrying [activity.NotRun] — it ran
	// nothing — for its retry policy, or its workflow (AwaitDecision waits
	// for the store), to run it again. Negative turns retrying off.
	// Defaults to 15 seconds ([DefaultClaimRetry]).
	ClaimRetry time.Duration
	// OrphanRetry is how long the dispatcher keeps trying, in the
	// background, a write that settles a claim after its body returned
	// when the store could not take it (the claim is then orphaned):
	// recording the outcome (after RecordAttempts failed, or StoreTimeout
	// passed), marking it indeterminate, freeing the key. Until the write
	// lands the record stays pending; without it, it would stay pending with
	// its lease run out until a duplicate declared the holder lost — and
	// after a run's last call no duplicate comes. The background attempts
	// are fenced by the claim's token, so a key taken over in the meantime
	// is never overwritten. At most 1,024 run at once;
	// [Interceptor.Stop] ends them. Negative turns it off. Defaults to
	// 5 minutes ([DefaultOrphanRetry]).
	OrphanRetry time.Duration
	// StoreTimeout bounds the store calls made after the body returned,
	// which run even when the activity's context has ended. When the
	// declaration's probe is asked first, the calls that settle what it
	// answered get StoreTimeout of their own, counted from its answer: the
	// probe's time is bounded by the activity's remaining time, not by
	// this. Defaults to 10 seconds ([DefaultStoreTimeout]).
	StoreTimeout time.Duration
	// DataConverter encodes the outcomes recorded in the store. It never
	// encodes what reaches Temporal: the result of a declared activity, also
	// one answered from the store, goes back to the SDK to be encoded by the
	// worker's own converter and codecs, exactly like an undeclared one's.
	// Defaults to the client's converter when the worker's client was built
	// with the worker package's plugin in its options (worker.NewPlugin,
	// worker.ClientPlugin, worker.Dial, worker.ClientOptions), else to
	// converter.GetDefaultDataConverter(), which stores results in the
	// clear: set it to the client's when payloads must be encrypted at rest
	// in the store too.
	DataConverter converter.DataConverter
	// Observer receives every event. Defaults to none; the worker package
	// installs one that logs through zap.
	Observer Observer
	// Identity names this worker in the records' holders. Defaults to
	// hostname@pid.
	Identity string
	// AwaitDecision makes a workflow wait for a person instead of failing
	// when an activity call ends indeterminate with a key: the call blocks,
	// [decision.QueryName] lists what is pending, and a [decision.Decision] sent as the
	// [decision.UpdateName] (or on [decision.SignalName]) settles it — record the
	// result, free the key, retry, or fail. The decision is recorded through
	// the [decision.ResolveActivityName] activity, which the worker package's plugin
	// (and so worker.New) registers. Off
	// by default: the workflow receives the typed error and handles it
	// itself. A workflow records at its first activity call whether it is
	// routed (see [wire.RouterChangeID]), so turning this on or off applies to
	// new workflows and never breaks the replay of running ones.
	AwaitDecision bool
	// DecisionTimeout bounds the wait for a decision; when it passes, the
	// call fails with the indeterminate error. Defaults to no bound. The
	// value in force when a wait begins is recorded in the history, so
	// changing it never breaks replay.
	DecisionTimeout time.Duration
	// PendingSearchAttribute names a KeywordList search attribute that a
	// waiting workflow sets to the keys it waits on (and unsets when it
	// waits no more), so `temporal workflow list --query
	// 'IdempotencyPendingKeys IS NOT NULL'` finds every waiting workflow.
	// The namespace must have it (temporal operator search-attribute create
	// --name IdempotencyPendingKeys --type KeywordList); see
	// [Interceptor.CheckSearchAttribute]. Empty: none is set.
	PendingSearchAttribute string
	// KeySecret, when set, keys the derivation of the keys and check
	// digests of the declared calls of new workflows: each is an
	// HMAC-SHA-256 under the secret (keyspace "k1:" keys, "c2:" checks)
	// instead of a SHA-256, so that whoever reads a record, the search
	// attribute or an error message cannot try likely argument values (a
	// card's last four digits, an amount) against it. A workflow records at
	// its first activity call the generation of the secret in force (see
	// [wire.KeySecretChangeID]) and keeps it for its life, so setting, changing
	// or removing this option never changes a running workflow's keys.
	// Off by default. Switch it on, and rotate it, in two deploys: first
	// give every worker the secret in KeySecrets, then make it KeySecret
	// (docs/OPERATING.md, "Keyed derivation").
	//
	// A generation is bound to its bytes in each tenant's store (a record
	// under the key "kf1:<generation>" holding the secret's
	// [keyspace.Secret.Fingerprint], written by the first worker to derive
	// under it): a worker whose bytes of a generation differ from the
	// recorded ones runs nothing under it (the retryable
	// [decision.ErrorTypeUnknownKeySecret], a misconfigured event) rather
	// than derive other keys for the same calls.
	//
	// A Nexus request ([NexusOperation]), which no history pins to a
	// generation, is keyed under the KeySecret of the worker that takes
	// it; when no record stands under that key, it looks one up under the
	// other derivations the worker holds (unkeyed and KeySecrets), and
	// takes the one found.
	KeySecret *keyspace.Secret
	// KeySecrets are the other secrets this worker derives with: those of
	// the generations running workflows were keyed under (until every such
	// workflow has closed) and the next one, deployed before it becomes
	// KeySecret. A call keyed under a generation the worker does not hold
	// fails, retryably, with [decision.ErrorTypeUnknownKeySecret] and runs
	// nothing. Two secrets must not share a generation.
	KeySecrets []*keyspace.Secret
	// ProbeOnSchedule makes a workflow waiting for a person on a key whose
	// activity declares a probe ask the probe on its whole schedule in one
	// heartbeating activity (decision.ProbeOnScheduleActivityName): a
	// handful of history events per wait instead of a timer and an
	// activity per ask (up to 24 each). A workflow records at its first
	// such wait whether it does (see [wire.ProbeOnScheduleChangeID]), so the
	// option applies to new waits of new workflows. Off by default: turn it
	// on only once every worker runs a release that has it, since earlier
	// releases can neither replay such a workflow nor run the activity.
	ProbeOnSchedule bool
	// WaitAfterProbeRerun makes a call that the probe's answer ran again
	// (a routed workflow's wait settled by [decision.ProbeDecider]) and
	// that fails indeterminate again wait once more, for the probe or a
	// person, instead of reaching the workflow with its error: the probe's
	// answer was about the earlier run, not the one it caused. The call
	// reaches the workflow when the probe answers, on that wait, that
	// nothing landed (the retryable [decision.ErrorTypeNotLanded]), or
	// after five such runs in a row. A workflow records where this first
	// happens whether it does (see [wire.ProbeRerunChangeID]). Off by default:
	// turn it on only once every worker runs a release that has it, since
	// earlier releases cannot replay the wait, and their Probe activity
	// answers "settled" on a key under which no record stands, which runs
	// a downstream that fails every call again without end.
	WaitAfterProbeRerun bool
}

// Interceptor is the worker interceptor that makes declared activities safe
// to retry. Install it in worker.Options.Interceptors and declare policies
// with [Interceptor.Declare]; activities without a declaration pass through
// untouched.
type Interceptor struct {
	interceptor.WorkerInterceptorBase

	opts Options
	// tenantFromHeader is set when Options.Tenant was left nil: the tenant
	// of an execution is its workflow's, as the header carries it.
	tenantFromHeader bool
	// tenantIgnored is set once EventTenantIgnored was reported.
	tenantIgnored atomic.Bool

	mu    sync.RWMutex
	decls map[string]*activity.Declaration

	// secrets are Options.KeySecret and Options.KeySecrets by generation.
	secrets map[int]*keyspace.Secret
	// boundSecrets holds, by secretBinding, the secrets this worker found
	// the store's fingerprint of (see bindSecret).
	boundSecrets sync.Map

	// noSearchAttribute is set when the namespace lacks
	// Options.PendingSearchAttribute.
	noSearchAttribute atomic.Bool

	// background holds the goroutines that outlive an activity (settling
	// orphaned claims); Stop ends them.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	bgMu      sync.Mutex
	bgRunning int  // goroutines running or reserved
	bgLimit   int  // maxOrphanRetries; tests lower it
	bgStopped bool // Stop was called
}

// maxOrphanRetries bounds the orphaned claims (see Options.OrphanRetry) one
// interceptor retries in the background at once, so a long outage under
// load cannot pile up goroutines and outcomes without end. A claim orphaned
// while that many are retrying stays pending, as without OrphanRetry, and
// its EventOrphaned says so.
const maxOrphanRetries = 1024

// Stop ends the work the interceptor does in the background — the attempts
// to settle claims the store could not take a write for when their body
// returned (see Options.OrphanRetry) — and waits for it. Call it after the
// worker has stopped; worker.Worker.Stop does. Records still pending then
// stay pending until a duplicate finds their lease run out, as without
// OrphanRetry; so do claims orphaned after Stop. Stop may be called more
// than once.
func (i *Interceptor) Stop() {
	i.bgMu.Lock()
	i.bgStopped = true
	i.bgMu.Unlock()
	i.bgCancel()
	i.bg.Wait()
}

// reserveBackground reserves room for one background goroutine: false
// after Stop or when maxOrphanRetries already run.
func (i *Interceptor) reserveBackground() bool {
	i.bgMu.Lock()
	defer i.bgMu.Unlock()
	if i.bgStopped || i.bgRunning >= i.bgLimit {
		return false
	}
	i.bgRunning++
	i.bg.Add(1)
	return true
}

// goBackground runs f, in room reserved by reserveBackground, until it
// returns or Stop is called.
func (i *Interceptor) goBackground(f func(ctx context.Context)) {
	go func() {
		defer func() {
			i.bgMu.Lock()
			i.bgRunning--
			i.bgMu.Unlock()
			i.bg.Done()
		}()
		f(i.bgCtx)
	}()
}

var _ interceptor.WorkerInterceptor = (*Interceptor)(nil)

// ErrInvalidOptions matches every error [New] returns for malformed
// options. It is [store.ErrInvalidOptions], which every constructor of the
// module's errors match.
var ErrInvalidOptions = store.ErrInvalidOptions

// OptionsError names the option [New] refused, as the caller spelt it
// ("interceptor.Options.Lease"). It is [store.OptionsError], the one shape
// of every constructor's refusal, and matches [ErrInvalidOptions].
type OptionsError = store.OptionsError

// optionsError is the refusal of the option Options.<field>.
func optionsError(field, reason string) error {
	return &OptionsError{Field: "interceptor.Options." + field, Reason: reason}
}

// New validates opts, applies the defaults and returns the interceptor.
func New(opts Options) (*Interceptor, error) {
	switch {
	case opts.Store == nil:
		return nil, optionsError("Store", "is required")
	case opts.Scope > ScopeFirstRun:
		return nil, optionsError("Scope", "unknown scope "+strconv.Itoa(int(opts.Scope)))
	case opts.RecordAttempts < 0:
		return nil, optionsError("RecordAttempts", "must not be negative")
	case len(opts.Identity) > 256:
		return nil, optionsError("Identity", "longer than 256 bytes")
	case !validSearchAttributeName(opts.PendingSearchAttribute):
		return nil, optionsError("PendingSearchAttribute", fmt.Sprintf("%q is not a search attribute name (a letter or _, then letters, digits or _)", opts.PendingSearchAttribute))
	}
	if opts.DefaultTenant != "" {
		if err := store.ValidateTenant(opts.DefaultTenant); err != nil {
			return nil, optionsError("DefaultTenant", err.Error())
		}
	}
	secrets, err := secretsByGeneration(opts.KeySecret, opts.KeySecrets)
	if err != nil {
		return nil, err
	}
	for _, d := range []struct {
		field    string
		value    time.Duration
		min, def time.Duration
	}{
		{"Lease", opts.Lease, minLease, DefaultLease},
		{"WaitHeartbeat", opts.WaitHeartbeat, minWaitHeartbeat, DefaultWaitHeartbeat},
		{"RecordBackoff", opts.RecordBackoff, minRecordBackoff, DefaultRecordBackoff},
		{"StoreTimeout", opts.StoreTimeout, minStoreTimeout, DefaultStoreTimeout},
		{"DecisionTimeout", opts.DecisionTimeout, minDecisionTimeout, 0},
	} {
		switch {
		case d.value < 0:
			return nil, optionsError(d.field, "must not be negative")
		case d.value > 0 && d.value < d.min:
			return nil, optionsError(d.field, fmt.Sprintf("%v is below the minimum of %v (zero means the default)", d.value, d.min))
		}
	}
	tenantFromHeader := opts.Tenant == nil
	if tenantFromHeader {
		opts.Tenant = TenantFromHeader
	}
	opts.Lease = cmp.Or(opts.Lease, DefaultLease)
	opts.WaitHeartbeat = cmp.Or(opts.WaitHeartbeat, DefaultWaitHeartbeat)
	opts.RecordAttempts = cmp.Or(opts.RecordAttempts, DefaultRecordAttempts)
	opts.RecordBackoff = cmp.Or(opts.RecordBackoff, DefaultRecordBackoff)
	opts.StoreTimeout = cmp.Or(opts.StoreTimeout, DefaultStoreTimeout)
	opts.ClaimRetry = cmp.Or(opts.ClaimRetry, DefaultClaimRetry)
	opts.OrphanRetry = cmp.Or(opts.OrphanRetry, DefaultOrphanRetry)
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = host + "@" + strconv.Itoa(os.Getpid())
	}
	bgCtx, bgCancel := context.WithCancel(context.Background())
	return &Interceptor{opts: opts, decls: make(map[string]*activity.Declaration), secrets: secrets,
		tenantFromHeader: tenantFromHeader,
		bgCtx:            bgCtx, bgCancel: bgCancel, bgLimit: maxOrphanRetries}, nil
}

// ErrAlreadyDeclared is returned by [Interceptor.Declare] for a second
// declaration under one activity name.
var ErrAlreadyDeclared = errors.New("idempotency: activity already declared")

// Declare makes the dispatcher apply each declaration's policy to the
// activity registered under its name. Declaring one name twice is refused,
// and so is a transactional declaration the store cannot honour (a
// [*TransactionalError]); then none of decls is applied.
func (i *Interceptor) Declare(decls ...*activity.Declaration) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	seen := make(map[string]bool, len(decls))
	for _, d := range decls {
		if d == nil {
			return fmt.Errorf("idempotency: nil declaration")
		}
		if _, ok := i.decls[d.Name()]; ok || seen[d.Name()] {
			return fmt.Errorf("%w: %q", ErrAlreadyDeclared, d.Name())
		}
		seen[d.Name()] = true
		if err := i.checkRetention(d); err != nil {
			return err
		}
		if err := checkTransactional(i.opts.Store, d); err != nil {
			return err
		}
	}
	for _, d := range decls {
		i.decls[d.Name()] = d
	}
	return nil
}

// checkRetention refuses a declaration whose own retention window is
// shorter than the lease, or longer than a store keeps: a record that
// expires while its holder may still be running would free the key under
// it.
func (i *Interceptor) checkRetention(d *activity.Declaration) error {
	r := d.Retention()
	switch {
	case r == 0:
		return nil
	case r < i.opts.Lease:
		return &activity.DeclarationError{Activity: d.Name(), Field: "Policy.Retention",
			Reason: fmt.Sprintf("%v is shorter than the lease (Options.Lease, %v): the record could expire while its holder runs", r, i.opts.Lease)}
	case r > store.MaxRetention:
		return &activity.DeclarationError{Activity: d.Name(), Field: "Policy.Retention",
			Reason: fmt.Sprintf("%v is longer than a store keeps (store.MaxRetention, 100 years)", r)}
	}
	return nil
}

// Undeclare removes the declarations of the named activities, if any: from
// then on they pass through the dispatcher untouched. The worker package
// uses it to undo a declaration whose activity the SDK refused to register.
func (i *Interceptor) Undeclare(names ...string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, n := range names {
		delete(i.decls, n)
	}
}

// Declaration returns the declaration applied to the activity type name, if
// any.
func (i *Interceptor) Declaration(name string) (*activity.Declaration, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	d, ok := i.decls[name]
	return d, ok
}

// CheckTransactional returns the [*TransactionalError] with which
// [Interceptor.Declare] refuses d, or nil: d is not transactional, or the
// interceptor's store can run it. The worker package calls it to refuse a
// registration before it registers anything.
func (i *Interceptor) CheckTransactional(d *activity.Declaration) error {
	return checkTransactional(i.opts.Store, d)
}

// Store returns the store the interceptor records in.
func (i *Interceptor) Store() store.Store { return i.opts.Store }

// InterceptActivity implements interceptor.WorkerInterceptor.
func (i *Interceptor) InterceptActivity(
	ctx context.Context,
	next interceptor.ActivityInboundInterceptor,
) interceptor.ActivityInboundInterceptor {
	a := &activityInbound{root: i}
	a.Next = next
	return a
}
