// Package spec_test computes the specification's vectors of outcomes and
// error types (spec/vectors/outcomes.json, spec/vectors/errors.json) with
// the library's real code and compares them byte for byte with the files,
// so a change that alters one fails. The directory holds only tests: the
// specification (SPEC.md) and its vectors are not Go code. Run with
// -update to write the files:
//
//	go test ./spec/ -run Vectors -update
//
// The other vectors are written by the packages that own the code they
// describe: keyspace (canonical, keys, checks), pgstore (records-postgres),
// redisstore (records-redis, the Lua scripts and lua.json).
package spec_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/compat"
	"github.com/tesserix/idempotency/internal/wire"
)

var update = flag.Bool("update", false, "write the specification's vectors instead of checking them")

func checkFile[V any](t *testing.T, name, test string, vectors []V) {
	t.Helper()
	compat.CheckSpecFile(t, filepath.Join("vectors", name), test, vectors, *update)
}

// payload is a Temporal Payload spelled out: its metadata (values as
// text) and its data, as text when it is JSON and in hex always.
type payload struct {
	Metadata map[string]string `json:"metadata"`
	DataText string            `json:"data_text,omitempty"`
	DataHex  string            `json:"data_hex"`
}

func payloadOf(p *commonpb.Payload) payload {
	out := payload{Metadata: map[string]string{}, DataHex: hex.EncodeToString(p.GetData())}
	for k, v := range p.GetMetadata() {
		out.Metadata[k] = string(v)
	}
	if enc := out.Metadata[converter.MetadataEncoding]; enc == converter.MetadataEncodingJSON {
		out.DataText = string(p.GetData())
	}
	return out
}

// failure is a temporal.api.failure.v1.Failure spelled out: the fields
// the default failure converter sets for an application error.
type failure struct {
	Message      string    `json:"message"`
	Source       string    `json:"source"`
	StackTrace   string    `json:"stack_trace"`
	Type         string    `json:"type"`
	NonRetryable bool      `json:"non_retryable"`
	Category     string    `json:"category"`
	Details      []payload `json:"details"`
	Cause        *failure  `json:"cause"`
}

func failureOf(t *testing.T, f *failurepb.Failure) *failure {
	t.Helper()
	if f == nil {
		return nil
	}
	info := f.GetApplicationFailureInfo()
	require.NotNil(t, info, "an application failure")
	out := &failure{Message: f.GetMessage(), Source: f.GetSource(), StackTrace: f.GetStackTrace(),
		Type: info.GetType(), NonRetryable: info.GetNonRetryable(), Category: info.GetCategory().String(),
		Details: []payload{}, Cause: failureOf(t, f.GetCause())}
	for _, p := range info.GetDetails().GetPayloads() {
		out.Details = append(out.Details, payloadOf(p))
	}
	return out
}

// outcomeVector is one outcome as a completed record holds it.
type outcomeVector struct {
	Name string `json:"name"`
	// Kind is "value" (what the activity returned) or "failure" (a
	// definite failure, activity.Policy.DefiniteErrors).
	Kind string `json:"kind"`
	// ValueJSON is the value returned, as JSON text; absent for a
	// failure and for an activity that returns only an error.
	ValueJSON string `json:"value_json,omitempty"`
	// OutcomeHex is the record's outcome bytes: a temporal.api.common.v1
	// Payloads message in protobuf wire form ("" when there is none).
	OutcomeHex string `json:"outcome_hex"`
	// Payloads are the message's payloads, spelled out.
	Payloads []payload `json:"payloads"`
	// Failure is the failure a failure's one payload holds.
	Failure *failure `json:"failure,omitempty"`
}

type booking struct {
	Confirmation string   `json:"confirmation"`
	Seats        []string `json:"seats"`
	Fare         float64  `json:"fare"`
	Note         string   `json:"note,omitempty"`
}

func TestVectorsOutcomes(t *testing.T) {
	var out []outcomeVector
	value := func(name string, v any, valueJSON string) {
		t.Helper()
		b, err := interceptor.EncodeOutcome(nil, v)
		require.NoError(t, err, name)
		vec := outcomeVector{Name: name, Kind: "value", ValueJSON: valueJSON, OutcomeHex: hex.EncodeToString(b), Payloads: []payload{}}
		var ps commonpb.Payloads
		require.NoError(t, proto.Unmarshal(b, &ps))
		for _, p := range ps.GetPayloads() {
			vec.Payloads = append(vec.Payloads, payloadOf(p))
		}
		// What Go reads back is the value again.
		if len(ps.GetPayloads()) == 1 && valueJSON != "" {
			var back any
			require.NoError(t, interceptor.DecodeOutcome(nil, b, &back), name)
			bj, err := json.Marshal(back)
			require.NoError(t, err)
			var want any
			require.NoError(t, json.Unmarshal([]byte(valueJSON), &want))
			wj, _ := json.Marshal(want)
			assert.JSONEq(t, string(wj), string(bj), name)
		}
		out = append(out, vec)
	}
	value("string", "CONF-BA117-Ada", `"CONF-BA117-Ada"`)
	value("number", 120.5, `120.5`)
	value("integer", int64(9007199254740993), `9007199254740993`)
	value("true", true, `true`)
	value("struct", booking{Confirmation: "CONF-BA117-Ada", Seats: []string{"12A", "12B"}, Fare: 120.5}, `{"confirmation":"CONF-BA117-Ada","seats":["12A","12B"],"fare":120.5}`)
	value("map-sorted-members", map[string]any{"z": 1, "a": "<b>&"}, `{"a":"<b>&","z":1}`)
	value("unicode", "zürich-ä €", `"zürich-ä €"`)
	value("null-pointer", (*booking)(nil), `null`)
	value("bytes", []byte{0x00, 0x01, 0xfe, 0xff}, "")
	// EncodeOutcome of nil (what a person's decision records for a null
	// result) is a binary/null payload; the dispatcher itself records
	// nothing (an empty outcome) for a body whose result is nil, such as
	// an activity that returns only an error.
	value("nil-encoded", nil, "")
	out = append(out, outcomeVector{Name: "no-result", Kind: "value", OutcomeHex: "", Payloads: []payload{}})

	fail := func(name string, err error) {
		t.Helper()
		b, eerr := interceptor.EncodeFailure(nil, err)
		require.NoError(t, eerr, name)
		vec := outcomeVector{Name: name, Kind: "failure", OutcomeHex: hex.EncodeToString(b), Payloads: []payload{}}
		var ps commonpb.Payloads
		require.NoError(t, proto.Unmarshal(b, &ps))
		require.Len(t, ps.GetPayloads(), 1, name)
		p := ps.GetPayloads()[0]
		require.Equal(t, wire.FailureEncoding, string(p.GetMetadata()[converter.MetadataEncoding]), name)
		vec.Payloads = append(vec.Payloads, payloadOf(p))
		var f failurepb.Failure
		require.NoError(t, proto.Unmarshal(p.GetData(), &f))
		vec.Failure = failureOf(t, &f)
		out = append(out, vec)
	}
	fail("failure", temporal.NewApplicationError("card declined", "CardDeclined"))
	fail("failure-non-retryable", temporal.NewNonRetryableApplicationError("seat taken", "SeatTaken", nil))
	fail("failure-with-details", temporal.NewNonRetryableApplicationError("fare changed", "FareChanged", nil,
		map[string]any{"old": 120.5, "new": 130}, "EUR"))
	fail("failure-with-cause", temporal.NewApplicationErrorWithCause("booking refused", "BookingRefused",
		temporal.NewApplicationError("no seats", "NoSeats")))
	fail("failure-plain-error", errors.New("a plain Go error"))
	checkFile(t, "outcomes.json", "spec_test.TestVectorsOutcomes", out)
}

// errorVector is one error type the library fails a call with.
type errorVector struct {
	Name string `json:"name"`
	// Type is the ApplicationError's type string.
	Type string `json:"type"`
	// Retryable: "yes", "no", or "depends" (see Note).
	Retryable string `json:"retryable"`
	// Benign: in Temporal's benign category.
	Benign bool `json:"benign"`
	// Details names the one details payload's shape, "" for none.
	Details string `json:"details"`
	// ExampleDetailsJSON is an example of the details payload's JSON
	// (json/plain), as the Go code writes it, where it has details.
	ExampleDetailsJSON string `json:"example_details_json,omitempty"`
	// Note says when it is raised, and when Retryable is "depends".
	Note string `json:"note"`
}

// detailsJSON returns the data of err's one details payload.
func detailsJSON(t *testing.T, err error) (string, bool) {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae))
	f := temporal.GetDefaultFailureConverter().ErrorToFailure(err)
	ps := f.GetApplicationFailureInfo().GetDetails().GetPayloads()
	require.Len(t, ps, 1)
	return string(ps[0].GetData()), ae.NonRetryable()
}

func TestVectorsErrors(t *testing.T) {
	retention := 72 * time.Hour
	indet := activity.NewIndeterminateError(activity.IndeterminateOutcome{
		Activity: "Book", Tenant: "acme", Key: "v1:5d2c4c0bd7b4f2d0f4f4e5b0b6c1b2c56d2e9b2e1f4b1a0f7e0c6f1a2b3c4d5e",
		Reason: activity.ReasonBodyFailed, BodyEntered: true, EffectMayHaveLanded: true,
		WorkflowID: "booking/42", RunID: "0193a1b2-c3d4-7e5f-8a9b-000000000001", ActivityID: "5",
		Token: 3568430689138537426, Check: "c1:a3515ec52eab311b:c9265cd8bd7a76c50211580b050c6c618ef94ca07b7d8dcf76e86dffc6b48009",
		Retention: retention, Probe: true,
	}, errors.New("read tcp 10.0.0.7:51234->10.0.0.9:443: connection reset by peer"))
	indetJSON, indetNR := detailsJSON(t, indet)
	require.True(t, indetNR)

	notRun := activity.NewNotRunError(activity.NotRun{Activity: "Book", Tenant: "acme",
		Key:        "v1:5d2c4c0bd7b4f2d0f4f4e5b0b6c1b2c56d2e9b2e1f4b1a0f7e0c6f1a2b3c4d5e",
		WorkflowID: "booking/42", RunID: "0193a1b2-c3d4-7e5f-8a9b-000000000001", ActivityID: "5"},
		errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
	notRunJSON, notRunNR := detailsJSON(t, notRun)
	require.False(t, notRunNR)

	mismatch := activity.NewArgumentsMismatchError(activity.ArgumentsMismatch{Activity: "Book", Tenant: "acme",
		Key: "v1:5d2c4c0bd7b4f2d0f4f4e5b0b6c1b2c56d2e9b2e1f4b1a0f7e0c6f1a2b3c4d5e", Arguments: []string{"fare"},
		Found: activity.FoundCompleted, RecordWorkflowID: "booking/41", RecordRunID: "0193a1b2-c3d4-7e5f-8a9b-000000000000",
		WorkflowID: "booking/42", RunID: "0193a1b2-c3d4-7e5f-8a9b-000000000001", ActivityID: "5"})
	mismatchJSON, mismatchNR := detailsJSON(t, mismatch)
	require.True(t, mismatchNR)

	out := []errorVector{
		{Name: "indeterminate-outcome", Type: decision.ErrorTypeIndeterminateOutcome, Retryable: "no",
			Details: "IndeterminateOutcome", ExampleDetailsJSON: indetJSON,
			Note: "an EFFECTFUL call's effect is unknown; a person decides (the workflow's decision path routes on this type)"},
		{Name: "not-landed", Type: decision.ErrorTypeNotLanded, Retryable: "yes", Benign: true,
			Note: "the probe answered that the effect did not land; the key was freed"},
		{Name: "key-not-derivable", Type: decision.ErrorTypeKeyNotDerivable, Retryable: "yes",
			Note: "no key could be derived for an IDEMPOTENT call (an EFFECTFUL one ends indeterminate with reason key_not_derivable, body not entered)"},
		{Name: "store-unavailable", Type: decision.ErrorTypeStoreUnavailable, Retryable: "depends",
			Details: "NotRun", ExampleDetailsJSON: notRunJSON,
			Note: "the store did not answer before the body ran: nothing ran (retryable); non-retryable only when a transactional declaration meets a store that cannot hold transactions (a misconfiguration)"},
		{Name: "outcome-unreadable", Type: decision.ErrorTypeOutcomeUnreadable, Retryable: "no",
			Note: "a recorded outcome cannot be decoded"},
		{Name: "invalid-tenant", Type: decision.ErrorTypeInvalidTenant, Retryable: "no",
			Note: "the tenant breaks the store's rule (empty, over 255 bytes, not UTF-8, NUL)"},
		{Name: "no-tenant", Type: decision.ErrorTypeNoTenant, Retryable: "depends",
			Note: "no tenant resolved: non-retryable when the tenant travels in the header; retryable when the worker's own tenant function gave none"},
		{Name: "superseded", Type: decision.ErrorTypeSuperseded, Retryable: "yes", Benign: true,
			Note: "an IDEMPOTENT body's claim was taken over while it ran"},
		{Name: "not-committed", Type: decision.ErrorTypeNotCommitted, Retryable: "yes",
			Note: "a transactional body's commit did not land; the key was freed"},
		{Name: "arguments-mismatch", Type: decision.ErrorTypeArgumentsMismatch, Retryable: "no",
			Details: "ArgumentsMismatch", ExampleDetailsJSON: mismatchJSON,
			Note: "the record under the key was made with other values of the checked arguments"},
		{Name: "decision-rejected", Type: decision.ErrorTypeRejected, Retryable: "no", Benign: true,
			Note: "the workflow's Update validator rejected a decision (returned to the Update's caller, not an activity failure)"},
		{Name: "bad-decision", Type: decision.ErrorTypeBadDecision, Retryable: "no",
			Note: "the Resolve activity was given a decision the store refuses every time"},
		{Name: "foreign-record", Type: decision.ErrorTypeForeignRecord, Retryable: "no",
			Note: "the Resolve or Probe activity named another tenant's or another workflow's record"},
		{Name: "unknown-key-secret", Type: decision.ErrorTypeUnknownKeySecret, Retryable: "yes",
			Note: "the call's key-secret header names a generation this worker does not hold"},
	}
	checkFile(t, "errors.json", "spec_test.TestVectorsErrors", out)
}
