// Package clientconv carries the data converter of the client an activity
// runs on in the activity's context, from the worker package, which knows
// the client, to the interceptor's dispatcher, which records outcomes with
// it when Options.DataConverter is unset (so the client's payload codecs
// apply to the store as they apply to Temporal's history).
package clientconv

import (
	"context"

	"go.temporal.io/sdk/converter"
)

type key struct{}

// With returns a copy of ctx carrying dc as the data converter of the
// client the activity runs on; a nil dc leaves ctx as it is.
func With(ctx context.Context, dc converter.DataConverter) context.Context {
	if dc == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, dc)
}

// From returns the converter ctx carries, if any.
func From(ctx context.Context) (converter.DataConverter, bool) {
	dc, ok := ctx.Value(key{}).(converter.DataConverter)
	return dc, ok
}
