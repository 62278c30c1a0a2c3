package decision

import (
	"encoding/json"
	"time"

	"github.com/tesserix/idempotency/activity"
)

// ProbeActivityName is the activity a workflow waiting for a person asks a
// declared probe again through (wire.SettleChangeID); worker.New and
// the worker package's plugin register interceptor.Interceptor.ProbeActivity
// under it, beside [ResolveActivityName].
const ProbeActivityName = "idempotency.Probe"

// ProbeOnScheduleActivityName is the activity a workflow waiting for a
// person asks a declared probe through when it asks on the whole schedule
// in one activity (wire.ProbeOnScheduleChangeID): the activity asks
// at the schedule's times, heartbeating between asks, and returns the first
// definite answer or the last after Max asks — a handful of history events
// where asking each time through [ProbeActivityName] writes a timer and an
// activity per ask. worker.New and the plugin register
// interceptor.Interceptor.ProbeOnScheduleActivity under it.
const ProbeOnScheduleActivityName = "idempotency.ProbeOnSchedule"

// ProbeOnScheduleRequest is the input of the
// [ProbeOnScheduleActivityName] activity: the key to ask about and the
// schedule to ask on.
type ProbeOnScheduleRequest struct {
	Probe ProbeRequest `json:"probe"`
	// First is the pause before the first ask (none when Now), Cap the
	// longest pause (each is twice the one before, at most Cap), Max how
	// many asks at most.
	First time.Duration `json:"first"`
	Cap   time.Duration `json:"cap"`
	Max   int           `json:"max"`
	Now   bool          `json:"now,omitempty"`
}

// ProbeDecider is Decision.By of a decision a probe's answer made.
const ProbeDecider = "idempotency.Probe"

// ProbeRequest is the input of the [ProbeActivityName] activity: one
// indeterminate key a workflow waits on.
type ProbeRequest struct {
	Activity string          `json:"activity"`
	Tenant   string          `json:"tenant"`
	Key      string          `json:"key"`
	Reason   activity.Reason `json:"reason,omitempty"`
	// Token is the token of the indeterminate record the wait is about
	// (zero: whichever indeterminate record stands, as for a call Temporal
	// timed out, which read no record).
	Token int64 `json:"token,omitempty"`
}

// ProbeReply is what the [ProbeActivityName] activity answers. It writes
// nothing: the workflow makes a definite answer its decision, and records
// it through [ResolveActivityName], fenced by Token, unless a person
// decided first.
type ProbeReply struct {
	// Landing is activity.Landing's String: "landed", "not_landed" or
	// "cannot_tell".
	Landing string `json:"landing"`
	// Result is a landed result as JSON, for the person reading the
	// history; Outcome is the same result encoded as the dispatcher records
	// one (interceptor.EncodeOutcome), which is what is recorded.
	Result  json.RawMessage `json:"result,omitempty"`
	Outcome []byte          `json:"outcome,omitempty"`
	// Token is the token of the indeterminate record the probe was asked
	// about.
	Token int64 `json:"token,omitempty"`
	// Settled: the record is no longer the indeterminate one asked about
	// (settled, freed, gone, or held by a holder whose lease ran out); the
	// call may run again and find what stands. The probe was not asked.
	Settled bool `json:"settled,omitempty"`
	// Detail says why the probe could not tell, or what Settled found.
	Detail string `json:"detail,omitempty"`
	// Asked is how many times the [ProbeOnScheduleActivityName] activity
	// asked; zero from [ProbeActivityName], which asks once.
	Asked int `json:"asked,omitempty"`
}

// ProbeSchedule is where asking a waiting key's probe again stands, in
// [PendingDecision].Probe.
type ProbeSchedule struct {
	// Asked is how many times the probe was asked since the wait began.
	Asked int `json:"asked"`
	// Max is how many times it is asked at most.
	Max int `json:"max"`
	// Next is the workflow time of the next ask; zero when no ask is due.
	Next time.Time `json:"next,omitzero"`
	// Last is what the last ask answered: "cannot_tell", an error, or the
	// reason its answer was not taken.
	Last string `json:"last,omitempty"`
	// OnSchedule: the probe is asked on the whole schedule in one
	// activity ([ProbeOnScheduleActivityName]); Asked and Last are known
	// when it returns, and meanwhile its heartbeat details (temporal
	// workflow describe, pending activities) say how far it is.
	OnSchedule bool `json:"on_schedule,omitempty"`
}
