package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/internal/wire"
)

// outcomeConverter is the SDK's default data converter with one change: a
// JSON payload decodes its numbers as json.Number, so an order number past
// 2^53 is shown as it was recorded, not rounded through a float64.
var outcomeConverter = converter.NewCompositeDataConverter(
	converter.NewNilPayloadConverter(),
	converter.NewByteSlicePayloadConverter(),
	converter.NewProtoJSONPayloadConverter(),
	converter.NewProtoPayloadConverter(),
	numberJSON{converter.NewJSONPayloadConverter()},
)

// numberJSON is the SDK's JSON payload converter, decoding numbers exactly.
type numberJSON struct {
	*converter.JSONPayloadConverter
}

// FromPayload decodes a json/plain payload with UseNumber.
func (numberJSON) FromPayload(p *commonpb.Payload, valuePtr any) error {
	if err := decodeJSON(p.GetData(), valuePtr); err != nil {
		return fmt.Errorf("%w: %v", converter.ErrUnableToDecode, err)
	}
	return nil
}

// decodeJSON decodes exactly one JSON value from data into v, numbers as
// json.Number.
func decodeJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// outcomeView is a recorded outcome as a person reads it.
type outcomeView struct {
	size     int    // bytes recorded
	encoding string // the payload's encoding metadata, when it has one
	json     []byte // the decoded value as compact JSON; nil when not decoded
	failure  string // a recorded definite failure, described; "" for none
}

// viewOutcome decodes a recorded outcome the way the dispatcher would hand
// it to a duplicate, with the default data converter. An outcome written
// through a payload codec (encryption, compression) does not decode here;
// only its size and encoding are reported.
func viewOutcome(outcome []byte) outcomeView {
	v := outcomeView{size: len(outcome)}
	if len(outcome) == 0 {
		return v
	}
	var p commonpb.Payloads
	if proto.Unmarshal(outcome, &p) == nil && len(p.GetPayloads()) > 0 {
		v.encoding = string(p.GetPayloads()[0].GetMetadata()[converter.MetadataEncoding])
	}
	if v.encoding == wire.FailureEncoding {
		// A definite failure (activity.Policy.DefiniteErrors), unless a
		// codec hides it.
		var f failurepb.Failure
		if proto.Unmarshal(p.GetPayloads()[0].GetData(), &f) == nil {
			v.failure = fmt.Sprintf("failed: %s (type %s)", f.GetMessage(), f.GetApplicationFailureInfo().GetType())
		}
		return v
	}
	var value any
	if err := interceptor.DecodeOutcome(outcomeConverter, outcome, &value); err != nil {
		return v
	}
	b, err := json.Marshal(value)
	if err != nil {
		return v
	}
	v.json = b
	return v
}

// String describes the outcome on one line.
func (v outcomeView) String() string {
	switch {
	case v.size == 0:
		return "(none)"
	case v.json != nil:
		return fmt.Sprintf("%s (%s, %d bytes)", v.json, orUnknown(v.encoding), v.size)
	case v.failure != "":
		return fmt.Sprintf("%s (a definite failure, %d bytes)", printable(v.failure), v.size)
	default:
		return fmt.Sprintf("(encoded: %d bytes, encoding %s; the default data converter cannot read it, so a payload codec is probably in use)",
			v.size, orUnknown(v.encoding))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return printable(s)
}

// encodeOutcome parses the JSON a person typed and encodes it as the
// dispatcher records an outcome, so that duplicates receive it. It returns
// the encoded outcome and the value as compact JSON, to be shown back.
func encodeOutcome(text string) ([]byte, []byte, error) {
	var value any
	if err := decodeJSON([]byte(text), &value); err != nil {
		return nil, nil, err
	}
	enc, err := interceptor.EncodeOutcome(nil, value)
	if err != nil {
		return nil, nil, err
	}
	shown, err := json.Marshal(value)
	if err != nil {
		return nil, nil, err
	}
	return enc, shown, nil
}
