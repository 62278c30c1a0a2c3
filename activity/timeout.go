package activity

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// ReasonTimedOut: Temporal ended the call's attempts — a timeout
// (start-to-close, heartbeat, schedule-to-close) with the retry policy run
// out — while an EFFECTFUL execution held, waited for or claimed the key,
// so the effect may have landed. The dispatcher makes the key travel with
// the timeout (see [TimeoutMarker]); [AsIndeterminate] reads it.
const ReasonTimedOut Reason = "timed_out"

// TimeoutMarkerVersion is the version of [TimeoutMarker] the dispatcher
// writes.
const TimeoutMarkerVersion = 1

// Stage is how far an execution had got when it sent the last heartbeat
// that reached Temporal, as a [TimeoutMarker] names it.
type Stage string

// The stages of an execution a [TimeoutMarker] names.
const (
	// StageClaiming: the execution was claiming the key (or waiting for the
	// store to answer); its body had not run.
	StageClaiming Stage = "claiming"
	// StageWaiting: the execution was waiting for another holder of the
	// key; its body had not run.
	StageWaiting Stage = "waiting"
	// StageBody: the execution's body was running.
	StageBody Stage = "body"
)

// TimeoutMarker is what the dispatcher appends, as the last detail, to
// every heartbeat of an EFFECTFUL execution, so that the key travels with a
// timeout: a *temporal.TimeoutError carries the last heartbeat's details.
// The activity's own code never sees it: activity.GetHeartbeatDetails and
// activity.HasHeartbeatDetails answer as if it were not there, and the
// details it records itself come first, unchanged. It is JSON; the workflow
// side recognises it by its version field, whatever its worker declares.
type TimeoutMarker struct {
	// Version is TimeoutMarkerVersion; its JSON name marks the detail.
	Version  int    `json:"idempotency_timeout_marker"`
	Activity string `json:"activity"`
	Tenant   string `json:"tenant,omitempty"`
	Key      string `json:"key"`
	// Stage is how far the execution had got when it sent the last
	// heartbeat that reached Temporal.
	Stage Stage `json:"stage,omitempty"`
	// Probe: the activity's declaration has a probe.
	Probe bool `json:"probe,omitempty"`
	// Check is the digest of the call's checked arguments (never their
	// values) and Retention its declared retention window, as
	// [IndeterminateOutcome] carries them: a decision on the timed-out call
	// that finds the key's record gone makes a record keeping both. Absent
	// from the markers of earlier releases, which read as none.
	Check     string        `json:"check,omitempty"`
	Retention time.Duration `json:"retention,omitempty"`
}

// maxHeartbeatDetails bounds how many heartbeat details are looked through
// for the marker.
const maxHeartbeatDetails = 64

// LastDetailMarker returns the [TimeoutMarker] that get — a function that
// decodes details into the pointers it is given, as
// TimeoutError.LastHeartbeatDetails and activity.GetHeartbeatDetails do —
// holds as its last detail, and how many details there are in all. A
// converter that does not hand out raw payloads reads as no marker.
func LastDetailMarker(get func(...any) error) (marker TimeoutMarker, n int, ok bool) {
	raws := make([]converter.RawValue, maxHeartbeatDetails)
	ptrs := make([]any, len(raws))
	for i := range raws {
		ptrs[i] = &raws[i]
	}
	if err := get(ptrs...); err != nil {
		return TimeoutMarker{}, 0, false
	}
	for n < len(raws) && raws[n].Payload() != nil {
		n++
	}
	if n == 0 {
		return TimeoutMarker{}, 0, false
	}
	p := raws[n-1].Payload()
	if string(p.GetMetadata()[converter.MetadataEncoding]) != converter.MetadataEncodingJSON {
		return TimeoutMarker{}, n, false
	}
	// workflowcheck flags encoding/json's reflection; the same payload decodes
	// the same on every replay (the workflow side reads it through AsIndeterminate).
	//workflowcheck:ignore
	if err := json.Unmarshal(p.GetData(), &marker); err != nil || marker.Version != TimeoutMarkerVersion || marker.Key == "" {
		return TimeoutMarker{}, n, false
	}
	return marker, n, true
}

// timedOut reads the outcome of a call whose attempts Temporal ended with a
// timeout carrying the dispatcher's marker.
func timedOut(err error) (IndeterminateOutcome, bool) {
	var te *temporal.TimeoutError
	if !errors.As(err, &te) || !te.HasLastHeartbeatDetails() {
		return IndeterminateOutcome{}, false
	}
	m, _, ok := LastDetailMarker(te.LastHeartbeatDetails)
	if !ok {
		return IndeterminateOutcome{}, false
	}
	o := IndeterminateOutcome{
		Activity:            m.Activity,
		Tenant:              m.Tenant,
		Key:                 m.Key,
		Reason:              ReasonTimedOut,
		BodyEntered:         m.Stage == StageBody,
		EffectMayHaveLanded: true,
		Probe:               m.Probe,
		Check:               m.Check,
		Retention:           m.Retention,
		Cause: fmt.Sprintf("Temporal ended the attempts (%s timeout) while the execution was at stage %q; "+
			"its body, or an earlier holder's, may have applied the effect", te.TimeoutType(), m.Stage),
	}
	var ae *temporal.ActivityError
	if errors.As(err, &ae) {
		o.ActivityID = ae.ActivityID()
	}
	return o, true
}
