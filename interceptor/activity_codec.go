package interceptor

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/internal/clientconv"
	"github.com/tesserix/idempotency/internal/wire"
)

// dataConverter returns the converter outcomes are recorded with for an
// activity running under ctx: Options.DataConverter, else the client's one
// ctx carries ([clientconv.With]), else the SDK's default. Like the SDK
// with the client's converter, it hands a context-aware one the activity's
// context. It sets no serialization context: a record is read back by
// duplicates, whose activity IDs differ.
//
// It does not wrap the converter for the SDK's transfer types (marked
// experimental, and moved to an internal package in SDK v1.51): the SDK's
// default converter, and a codec converter built on it, handle them
// already; a converter of the user's own encodes the recorded outcome as it
// would any value.
func (o *Options) dataConverter(ctx context.Context) converter.DataConverter {
	dc := o.DataConverter
	if dc == nil {
		dc = contextDataConverter(ctx)
	}
	if aware, ok := dc.(converter.ContextAware); ok {
		dc = aware.WithContext(ctx)
	}
	return dc
}

func contextDataConverter(ctx context.Context) converter.DataConverter {
	if dc, ok := clientconv.From(ctx); ok {
		return dc
	}
	return converter.GetDefaultDataConverter()
}

// codec turns what a call's body returned into the outcome it records,
// and a recorded outcome back into the call's answer, with the converter
// outcomes are recorded with (see Options.dataConverter). What goes back
// to the SDK is never encoded with it: the SDK encodes results itself.
type codec struct {
	dc       converter.DataConverter
	activity string // the declared activity's name, for its errors
}

// encode is result as the payloads recorded for it; nil for none.
func (c codec) encode(result any) (*commonpb.Payloads, error) {
	if result == nil {
		return nil, nil
	}
	if p, ok := result.(*commonpb.Payloads); ok {
		return p, nil
	}
	p, err := c.dc.ToPayloads(result)
	if err != nil {
		return nil, fmt.Errorf("idempotency: encoding the result of %s: %w", c.activity, err)
	}
	return p, nil
}

// outcome is answer of a record's outcome, as the store keeps it (the
// payloads in protobuf wire form; empty for an activity that returns only
// an error), recorded under key.
func (c codec) outcome(outcome []byte, key string) (any, error) {
	if len(outcome) == 0 {
		return nil, nil
	}
	var p commonpb.Payloads
	if err := proto.Unmarshal(outcome, &p); err != nil {
		return nil, c.unreadable(key, err)
	}
	return c.answer(&p, key)
}

// answer turns a recorded outcome into what the dispatcher hands the SDK:
// the payload with the store's codecs undone, as a raw value. The SDK then
// encodes it with the worker's own converter and codecs, exactly as it
// encodes a result the body returned, so what reaches Temporal's history is
// never the store's encoding and never plaintext a codec should have
// covered, whatever converter the store was written with.
func (c codec) answer(recorded *commonpb.Payloads, key string) (any, error) {
	switch n := len(recorded.GetPayloads()); n {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, c.unreadable(key, fmt.Errorf("%d payloads where an activity returns one", n))
	}
	var raw converter.RawValue
	if err := c.dc.FromPayloads(recorded, &raw); err != nil {
		return nil, c.unreadable(key, err)
	}
	if enc := string(raw.Payload().GetMetadata()[converter.MetadataEncoding]); enc == wire.FailureEncoding {
		var f failurepb.Failure
		if err := proto.Unmarshal(raw.Payload().GetData(), &f); err != nil {
			return nil, c.unreadable(key, fmt.Errorf("a recorded failure: %w", err))
		}
		return nil, failureConverter(c.dc).FailureToError(&f)
	}
	return raw, nil
}

// failureConverter converts a definite failure to and from its recorded
// form, with dc, the converter outcomes are recorded with.
func failureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc})
}

// encodeFailure encodes err as a recorded definite failure, with dc.
func encodeFailure(dc converter.DataConverter, err error) (*commonpb.Payloads, error) {
	b, merr := proto.Marshal(failureConverter(dc).ErrorToFailure(err))
	if merr != nil {
		return nil, merr
	}
	return dc.ToPayloads(converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(wire.FailureEncoding)},
		Data:     b,
	}))
}

// EncodeFailure encodes err as the dispatcher records a definite failure
// (activity.Policy.DefiniteErrors), in protobuf wire form: what a
// duplicate then receives as its error. dc nil is the SDK's default.
func EncodeFailure(dc converter.DataConverter, err error) ([]byte, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	p, perr := encodeFailure(dc, err)
	if perr != nil {
		return nil, fmt.Errorf("idempotency: encoding a failure: %w", perr)
	}
	return proto.Marshal(p)
}

// unreadable is the non-retryable error for a recorded outcome, under
// key, that cannot be turned back into a result.
func (c codec) unreadable(key string, err error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("idempotency: the recorded outcome of %q (key %s) cannot be decoded: %v", c.activity, key, err),
		decision.ErrorTypeOutcomeUnreadable, err)
}
