package activity_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tesserix/idempotency/activity"
)

func TestKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		kind         activity.Kind
		str          string
		valid        bool
		retried      bool
		deduplicated bool
	}{
		{"ReadOnly", activity.KindReadOnly, "READ_ONLY", true, true, false},
		{"Idempotent", activity.KindIdempotent, "IDEMPOTENT", true, true, true},
		{"Effectful", activity.KindEffectful, "EFFECTFUL", true, false, true},
		{"Zero", 0, "UNKNOWN", false, false, false},
		{"OutOfRange", activity.KindEffectful + 1, "UNKNOWN", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.str, tt.kind.String(), "String")
			assert.Equal(t, tt.valid, tt.kind.Valid(), "Valid")
			assert.Equal(t, tt.retried, tt.kind.Retried(), "Retried")
			assert.Equal(t, tt.deduplicated, tt.kind.Deduplicated(), "Deduplicated")
		})
	}
}
