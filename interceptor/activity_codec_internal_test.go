package interceptor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/internal/clientconv"
)

// tagCodec marks every payload it encodes with its name.
type tagCodec string

func (c tagCodec) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{"tag": []byte(c)}, Data: p.Data}
		for k, v := range p.Metadata {
			out[i].Metadata[k] = v
		}
	}
	return out, nil
}

func (c tagCodec) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) { return ps, nil }

// contextAware records the context it was given.
type contextAware struct {
	converter.DataConverter
	seen *context.Context
}

func (c *contextAware) WithContext(ctx context.Context) converter.DataConverter {
	*c.seen = ctx
	return c
}

// WithWorkflowContext takes a workflow.Context: the SDK's converter package
// named that type converter.WorkflowContext until v1.51, which dropped the
// name.
func (c *contextAware) WithWorkflowContext(workflow.Context) converter.DataConverter {
	return c
}

type ctxMark struct{}

// The converter outcomes are recorded with: the option, else the client's
// from the context, else the SDK's default; a context-aware one gets the
// activity's context.
func TestStoreConverterPrecedence(t *testing.T) {
	t.Parallel()
	client := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), tagCodec("client"))
	own := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), tagCodec("own"))
	ctx := context.Background()
	tag := func(dc converter.DataConverter) string {
		p, err := dc.ToPayload("seat 1")
		require.NoError(t, err)
		return string(p.Metadata["tag"])
	}

	assert.Empty(t, tag((&Options{}).dataConverter(ctx)), "nothing set: the default")
	assert.Equal(t, "client", tag((&Options{}).dataConverter(clientconv.With(ctx, client))), "the client's, from the context")
	assert.Equal(t, "own", tag((&Options{DataConverter: own}).dataConverter(clientconv.With(ctx, client))), "the option wins")
	assert.Equal(t, ctx, clientconv.With(ctx, nil), "a nil converter carries nothing")

	var seen context.Context
	aware := &contextAware{DataConverter: converter.GetDefaultDataConverter(), seen: &seen}
	actx := context.WithValue(clientconv.With(ctx, aware), ctxMark{}, "activity")
	(&Options{}).dataConverter(actx)
	require.NotNil(t, seen, "a context-aware converter is given the activity's context")
	assert.Equal(t, "activity", seen.Value(ctxMark{}))
}

// A recorded outcome goes back to the SDK as a raw value with the store's
// codecs undone, for the SDK to encode with the worker's own; an outcome
// that cannot be decoded is the typed, non-retryable error.
func TestAnswerUndoesTheStoresCodec(t *testing.T) {
	t.Parallel()
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}))
	c := codec{dc: dc, activity: "Book"}
	recorded, err := dc.ToPayloads("seat 1")
	require.NoError(t, err)
	require.Equal(t, "binary/zlib", string(recorded.Payloads[0].Metadata[converter.MetadataEncoding]))

	v, err := c.answer(recorded, "k")
	require.NoError(t, err)
	raw, ok := v.(converter.RawValue)
	require.True(t, ok, "got %T", v)
	assert.Equal(t, "json/plain", string(raw.Payload().Metadata[converter.MetadataEncoding]))
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(raw.Payload(), &s))
	assert.Equal(t, "seat 1", s)

	v, err = c.answer(&commonpb.Payloads{}, "k")
	assert.NoError(t, err)
	assert.Nil(t, v, "an activity that returns only an error")

	two := &commonpb.Payloads{Payloads: append(recorded.Payloads, recorded.Payloads...)}
	_, err = c.answer(two, "k")
	assert.ErrorContains(t, err, decision.ErrorTypeOutcomeUnreadable)

	bad := &commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("binary/zlib")}, Data: []byte("not zlib"),
	}}}
	_, err = c.answer(bad, "k")
	assert.ErrorContains(t, err, decision.ErrorTypeOutcomeUnreadable)
}
