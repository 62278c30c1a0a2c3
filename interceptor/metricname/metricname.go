// Package metricname names the metrics the idempotency library reports, so a
// dashboard, an alert rule or a test can refer to them by constant: the
// dispatcher reports them through the activity's Temporal metrics handler
// with the tags activity_type and idempotency_kind, so they reach whatever
// backend the worker already uses; the worker package reports the backlog
// gauges. Nothing here is needed to wire the library.
package metricname

// The metric names: the dispatcher's counters and timers, and the worker
// package's backlog gauges.
const (
	Claims        = "idempotency_claims"        // counter: keys taken
	Deduplicated  = "idempotency_deduplicated"  // counter: recorded outcomes returned
	Waits         = "idempotency_waits"         // counter: executions that waited for a holder
	Takeovers     = "idempotency_takeovers"     // counter: keys taken over from a lost holder
	Indeterminate = "idempotency_indeterminate" // counter: indeterminate outcomes
	StoreErrors   = "idempotency_store_errors"  // counter: failed store calls
	Orphaned      = "idempotency_orphaned"      // counter: claims the store could not settle when the body returned
	Superseded    = "idempotency_superseded"    // counter: bodies stopped because their claim was taken over
	LeaseLapsed   = "idempotency_lease_lapsed"  // counter: bodies stopped because no renewal of their claim was acknowledged
	// The backlog gauges, reported by the worker package on the sweeper's
	// schedule with the tag activity_type only (never a key or a tenant).
	BacklogIndeterminate = "idempotency_backlog_indeterminate" // gauge: indeterminate records waiting for a person
	BacklogStale         = "idempotency_backlog_stale"         // gauge: pending records whose lease ran out (their holder is gone)
	OrphansRecorded      = "idempotency_orphans_recorded"      // counter: orphaned claims settled later in the background
	ClaimLatency         = "idempotency_claim_latency"         // timer: how long a claim took
	WaitLatency          = "idempotency_wait_latency"          // timer: how long a waiter waited
	Probes               = "idempotency_probes"                // counter: probes asked
	ProbeLanded          = "idempotency_probe_landed"          // counter: outcomes a probe settled as landed
	ProbeNotLanded       = "idempotency_probe_not_landed"      // counter: outcomes a probe settled as not landed
	ProbeUnsettled       = "idempotency_probe_unsettled"       // counter: probes that could not tell or failed
	ProbeLate            = "idempotency_probe_late"            // counter: probes given up on because they did not answer in time
	ProbeLatency         = "idempotency_probe_latency"         // timer: how long a probe took
	Misconfigured        = "idempotency_misconfigured"         // counter: executions refused for want of a usable tenant
	ArgumentsMismatch    = "idempotency_arguments_mismatch"    // counter: executions refused because their record was made with other checked arguments
)
