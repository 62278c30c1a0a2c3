package activity_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/keyspace"
)

func TestKeyFromContext(t *testing.T) {
	t.Parallel()
	const k = keyspace.Key("v1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	tests := []struct {
		name   string
		ctx    context.Context
		want   keyspace.Key
		wantOK bool
	}{
		{"NoKey", context.Background(), "", false},
		{"WithKey", activity.WithKey(context.Background(), k), k, true},
		{"EmptyKeyIsNone", activity.WithKey(context.Background(), ""), "", false},
		{"InnerKeyWins", activity.WithKey(activity.WithKey(context.Background(), "v1:other"), k), k, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := activity.Key(tt.ctx)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
