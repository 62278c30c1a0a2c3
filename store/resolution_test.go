package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/store"
)

func TestResolutionJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(store.Resolution{})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(b), "no decision reads as nothing")

	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	r := store.Resolution{Action: store.ActionFree, By: "alice", Reason: "never charged", Reference: "T-1", At: at}
	b, err = json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"action":"free","by":"alice","reason":"never charged","reference":"T-1","at":"2026-12-03T08:00:00Z"}`, string(b))
	var back store.Resolution
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r, back)

	err = json.Unmarshal([]byte(`{"action":"maybe"}`), &back)
	require.ErrorIs(t, err, store.ErrInvalid)
}
