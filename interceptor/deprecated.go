package interceptor

// The names this file keeps are deprecated: each moved to where its readers
// are, and is kept here for one release so code that names it still
// compiles (the project's deprecation rule). The metric names moved to the
// metricname package, which dashboards and alert rules import; the names
// the library writes into histories and headers, which no user writes,
// moved inside the library; the bounds New applies are stated in the
// Options documentation.

import (
	"context"

	"go.temporal.io/sdk/converter"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/internal/clientconv"
	"github.com/tesserix/idempotency/internal/wire"
	"github.com/tesserix/idempotency/store"
)

// The metric names, moved to package metricname.
const (
	// MetricClaims is the name of the claims counter.
	//
	// Deprecated: use metricname.Claims; this name goes in the next release.
	MetricClaims = metricname.Claims
	// MetricDeduplicated is the name of the deduplicated counter.
	//
	// Deprecated: use metricname.Deduplicated; this name goes in the next release.
	MetricDeduplicated = metricname.Deduplicated
	// MetricWaits is the name of the waits counter.
	//
	// Deprecated: use metricname.Waits; this name goes in the next release.
	MetricWaits = metricname.Waits
	// MetricTakeovers is the name of the takeovers counter.
	//
	// Deprecated: use metricname.Takeovers; this name goes in the next release.
	MetricTakeovers = metricname.Takeovers
	// MetricIndeterminate is the name of the indeterminate counter.
	//
	// Deprecated: use metricname.Indeterminate; this name goes in the next release.
	MetricIndeterminate = metricname.Indeterminate
	// MetricStoreErrors is the name of the store errors counter.
	//
	// Deprecated: use metricname.StoreErrors; this name goes in the next release.
	MetricStoreErrors = metricname.StoreErrors
	// MetricOrphaned is the name of the orphaned counter.
	//
	// Deprecated: use metricname.Orphaned; this name goes in the next release.
	MetricOrphaned = metricname.Orphaned
	// MetricSuperseded is the name of the superseded counter.
	//
	// Deprecated: use metricname.Superseded; this name goes in the next release.
	MetricSuperseded = metricname.Superseded
	// MetricLeaseLapsed is the name of the lease-lapsed counter.
	//
	// Deprecated: use metricname.LeaseLapsed; this name goes in the next release.
	MetricLeaseLapsed = metricname.LeaseLapsed
	// MetricBacklogIndeterminate is the name of the indeterminate backlog gauge.
	//
	// Deprecated: use metricname.BacklogIndeterminate; this name goes in the next release.
	MetricBacklogIndeterminate = metricname.BacklogIndeterminate
	// MetricBacklogStale is the name of the stale backlog gauge.
	//
	// Deprecated: use metricname.BacklogStale; this name goes in the next release.
	MetricBacklogStale = metricname.BacklogStale
	// MetricOrphansRecorded is the name of the orphans-recorded counter.
	//
	// Deprecated: use metricname.OrphansRecorded; this name goes in the next release.
	MetricOrphansRecorded = metricname.OrphansRecorded
	// MetricClaimLatency is the name of the claim latency timer.
	//
	// Deprecated: use metricname.ClaimLatency; this name goes in the next release.
	MetricClaimLatency = metricname.ClaimLatency
	// MetricWaitLatency is the name of the wait latency timer.
	//
	// Deprecated: use metricname.WaitLatency; this name goes in the next release.
	MetricWaitLatency = metricname.WaitLatency
	// MetricProbes is the name of the probes counter.
	//
	// Deprecated: use metricname.Probes; this name goes in the next release.
	MetricProbes = metricname.Probes
	// MetricProbeLanded is the name of the probe-landed counter.
	//
	// Deprecated: use metricname.ProbeLanded; this name goes in the next release.
	MetricProbeLanded = metricname.ProbeLanded
	// MetricProbeNotLanded is the name of the probe-not-landed counter.
	//
	// Deprecated: use metricname.ProbeNotLanded; this name goes in the next release.
	MetricProbeNotLanded = metricname.ProbeNotLanded
	// MetricProbeUnsettled is the name of the probe-unsettled counter.
	//
	// Deprecated: use metricname.ProbeUnsettled; this name goes in the next release.
	MetricProbeUnsettled = metricname.ProbeUnsettled
	// MetricProbeLate is the name of the probe-late counter.
	//
	// Deprecated: use metricname.ProbeLate; this name goes in the next release.
	MetricProbeLate = metricname.ProbeLate
	// MetricProbeLatency is the name of the probe latency timer.
	//
	// Deprecated: use metricname.ProbeLatency; this name goes in the next release.
	MetricProbeLatency = metricname.ProbeLatency
	// MetricMisconfigured is the name of the misconfigured counter.
	//
	// Deprecated: use metricname.Misconfigured; this name goes in the next release.
	MetricMisconfigured = metricname.Misconfigured
	// MetricArgumentsMismatch is the name of the arguments-mismatch counter.
	//
	// Deprecated: use metricname.ArgumentsMismatch; this name goes in the next release.
	MetricArgumentsMismatch = metricname.ArgumentsMismatch
)

// The workflow.GetVersion change IDs the workflow side records in a
// workflow's history. No user writes them; their values never change.
const (
	// DecisionChangeID is the change ID "idempotency.decision".
	//
	// Deprecated: the library's own; its value stays "idempotency.decision" in every
	// history. This name goes in the next release.
	DecisionChangeID = wire.DecisionChangeID
	// DecisionOrderChangeID is the change ID "idempotency.decision-order".
	//
	// Deprecated: the library's own; its value stays "idempotency.decision-order" in every
	// history. This name goes in the next release.
	DecisionOrderChangeID = wire.DecisionOrderChangeID
	// FirstRunScopeChangeID is the change ID "idempotency.first-run-scope".
	//
	// Deprecated: the library's own; its value stays "idempotency.first-run-scope" in every
	// history. This name goes in the next release.
	FirstRunScopeChangeID = wire.FirstRunScopeChangeID
	// KeySecretChangeID is the change ID "idempotency.key-secret".
	//
	// Deprecated: the library's own; its value stays "idempotency.key-secret" in every
	// history. This name goes in the next release.
	KeySecretChangeID = wire.KeySecretChangeID
	// ProbeOnScheduleChangeID is the change ID "idempotency.probe-schedule".
	//
	// Deprecated: the library's own; its value stays "idempotency.probe-schedule" in every
	// history. This name goes in the next release.
	ProbeOnScheduleChangeID = wire.ProbeOnScheduleChangeID
	// ProbeRerunChangeID is the change ID "idempotency.probe-rerun".
	//
	// Deprecated: the library's own; its value stays "idempotency.probe-rerun" in every
	// history. This name goes in the next release.
	ProbeRerunChangeID = wire.ProbeRerunChangeID
	// RouterChangeID is the change ID "idempotency.router".
	//
	// Deprecated: the library's own; its value stays "idempotency.router" in every
	// history. This name goes in the next release.
	RouterChangeID = wire.RouterChangeID
	// RunScopeChangeID is the change ID "idempotency.run-scope".
	//
	// Deprecated: the library's own; its value stays "idempotency.run-scope" in every
	// history. This name goes in the next release.
	RunScopeChangeID = wire.RunScopeChangeID
	// SettleChangeID is the change ID "idempotency.settle".
	//
	// Deprecated: the library's own; its value stays "idempotency.settle" in every
	// history. This name goes in the next release.
	SettleChangeID = wire.SettleChangeID
	// TenantChangeID is the change ID "idempotency.tenant".
	//
	// Deprecated: the library's own; its value stays "idempotency.tenant" in every
	// history. This name goes in the next release.
	TenantChangeID = wire.TenantChangeID
)

// The headers a workflow's calls carry to the dispatcher, and the encoding
// of a recorded definite failure. No user writes them.
const (
	// KeySecretHeader is the header carrying the generation of a call's key
	// secret.
	//
	// Deprecated: the library's own; its value stays
	// "idempotency-key-secret". This name goes in the next release.
	KeySecretHeader = wire.KeySecretHeader
	// RunScopeHeader is the header carrying the run ID a call's key is
	// scoped by.
	//
	// Deprecated: the library's own; its value stays "idempotency-run-scope".
	// This name goes in the next release.
	RunScopeHeader = wire.RunScopeHeader
	// FailureEncoding marks the payload of a recorded definite failure.
	//
	// Deprecated: the library's own; EncodeFailure writes it. Its value
	// stays "binary/x-idempotency-failure". This name goes in the next
	// release.
	FailureEncoding = wire.FailureEncoding
)

// The bounds New applies, stated in the Options documentation.
const (
	// MinLease is the smallest non-zero Options.Lease New accepts.
	//
	// Deprecated: Options states the bound (30 milliseconds); this name
	// goes in the next release.
	MinLease = minLease
	// MinWaitHeartbeat is the smallest non-zero Options.WaitHeartbeat New
	// accepts.
	//
	// Deprecated: Options states the bound (a millisecond); this name goes
	// in the next release.
	MinWaitHeartbeat = minWaitHeartbeat
	// MinRecordBackoff is the smallest non-zero Options.RecordBackoff New
	// accepts.
	//
	// Deprecated: Options states the bound (a millisecond); this name goes
	// in the next release.
	MinRecordBackoff = minRecordBackoff
	// MinStoreTimeout is the smallest non-zero Options.StoreTimeout New
	// accepts.
	//
	// Deprecated: Options states the bound (a millisecond); this name goes
	// in the next release.
	MinStoreTimeout = minStoreTimeout
	// MinDecisionTimeout is the smallest non-zero Options.DecisionTimeout
	// New accepts.
	//
	// Deprecated: Options states the bound (a second); this name goes in
	// the next release.
	MinDecisionTimeout = minDecisionTimeout
	// MaxOrphanRetries bounds the orphaned claims one interceptor retries
	// in the background at once.
	//
	// Deprecated: Options.OrphanRetry states the bound (1,024); this name
	// goes in the next release.
	MaxOrphanRetries = maxOrphanRetries
)

// StandaloneRun returns the run component of the key of a standalone
// activity with activityID in namespace.
//
// Deprecated: the dispatcher derives it; no user needs it. This name goes
// in the next release.
func StandaloneRun(namespace, activityID string) string {
	return wire.StandaloneRun(namespace, activityID)
}

// CheckTransactional returns the error with which Interceptor.Declare
// refuses d on an interceptor recording in st, or nil.
//
// Deprecated: use Interceptor.CheckTransactional; this name goes in the
// next release.
func CheckTransactional(st store.Store, d *activity.Declaration) error {
	return checkTransactional(st, d)
}

// WithDataConverter returns a copy of ctx carrying dc as the data converter
// of the client the activity runs on.
//
// Deprecated: the worker package hands the client's converter over; set
// Options.DataConverter to choose one yourself. This name goes in the next
// release.
func WithDataConverter(ctx context.Context, dc converter.DataConverter) context.Context {
	return clientconv.With(ctx, dc)
}

// ResolveActivity returns the activity that records a person's decision in
// st, encoding a result with dc, its requests bound to the tenant in the
// activity's TenantHeader header.
//
// Deprecated: use Interceptor.ResolveActivity, which honours
// Options.Tenant and reports to Options.Observer; this name goes in the
// next release.
func ResolveActivity(st store.Store, dc converter.DataConverter) func(context.Context, decision.ResolveRequest) error {
	return resolveActivity(st, dc, TenantFromHeader, nil)
}
