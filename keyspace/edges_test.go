package keyspace_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/keyspace"
)

// deriveErr derives a key for a single key argument "a" holding v.
func deriveErr(v any) (keyspace.Key, error) {
	return keyspace.Derive(keyspace.Input{
		Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments:    map[string]any{"a": v},
		KeyArguments: []string{"a"},
	})
}

// wire decodes v's JSON the way a receiver keeping numbers exact would.
func wire(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	require.NoError(t, dec.Decode(&x))
	return x
}

// requireSameAsWire asserts v derives the key its JSON text derives: the key
// follows what crosses the wire.
func requireSameAsWire(t *testing.T, v any) {
	t.Helper()
	assert.Equal(t, derive(t, wire(t, v)), derive(t, v), "%#v derives the key of its JSON %s", v, mustJSON(t, v))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("boom") }

type withTime struct {
	time.Time
	Flight string `json:"flight"`
}

type withTimePtr struct {
	*time.Time
	Flight string `json:"flight"`
}

// B8: a panic while deriving is a typed error naming the argument.
func TestDeriveRecoversPanics(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		v    any
		says string
	}{
		"PanickingMarshalJSON": {panicky{}, "panic"},
		"NilEmbeddedTime":      {withTimePtr{Flight: "BA117"}, "nil"},
		"NestedPanic":          {map[string]any{"x": []any{panicky{}}}, "panic"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var err error
			require.NotPanics(t, func() { _, err = deriveErr(tt.v) })
			require.ErrorIs(t, err, keyspace.ErrUnencodable)
			var ve *keyspace.ValueError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "a", ve.Argument, "the error names the argument")
			assert.Contains(t, err.Error(), tt.says)
		})
	}
	// The encoder is still usable after a recovered panic.
	assert.NotEmpty(t, derive(t, "ok"))
}

type deepNode struct{ N any }

type arrNode struct{ N [1]any }

// C10: the depth limit holds through structs held in interfaces and arrays.
func TestDepthLimitThroughInterfaces(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{10_002, 100_000, 1_000_000} {
		var v any
		for range depth {
			v = deepNode{N: v}
		}
		_, err := deriveErr(v)
		require.ErrorIs(t, err, keyspace.ErrUnencodable, "depth %d", depth)
		assert.Contains(t, err.Error(), "deeper than 10000")
	}
	var a any
	for range 20_000 {
		a = arrNode{N: [1]any{a}}
	}
	_, err := deriveErr(a)
	require.ErrorIs(t, err, keyspace.ErrUnencodable)

	var ok any
	for range 1000 {
		ok = deepNode{N: ok}
	}
	_, err = deriveErr(ok)
	require.NoError(t, err, "1000 levels are fine")
}

// PInt has a pointer-receiver MarshalJSON: encoding/json calls it only when
// the value is addressable, and drops ",string" only then.
type PInt int

func (p *PInt) MarshalJSON() ([]byte, error) {
	return []byte(`{"p":` + strings.Repeat("1", int(*p)) + `}`), nil
}

// PText has a pointer-receiver MarshalText.
type PText int

func (p *PText) MarshalText() ([]byte, error) { return []byte("text"), nil }

type quotedP struct {
	N PInt  `json:"n,string"`
	T PText `json:"t,string"`
	I int   `json:"i,string"`
}

// C11: ",string" follows encoding/json exactly, addressable or not.
func TestQuotedWithPointerReceiverMarshalers(t *testing.T) {
	t.Parallel()
	v := quotedP{N: 2, T: 3, I: 4}
	requireSameAsWire(t, v)  // not addressable: "2", "3", "4"
	requireSameAsWire(t, &v) // addressable: MarshalJSON, MarshalText, "4"
	assert.NotEqual(t, derive(t, v), derive(t, &v), "the two wire forms differ, so do their keys")
}

// C12: key argument names are NFC-normalised at the top level too.
func TestTopLevelKeyArgumentNFC(t *testing.T) {
	t.Parallel()
	decomposed, composed := "cafe\u0301", "caf\u00e9"
	k1, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "r", Activity: "a",
		Arguments: map[string]any{decomposed: 1}, KeyArguments: []string{composed}})
	require.NoError(t, err, "the map's name is the key argument's, normalised")
	k2, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "r", Activity: "a",
		Arguments: map[string]any{composed: 1}, KeyArguments: []string{decomposed}})
	require.NoError(t, err)
	assert.Equal(t, k1, k2)
	k3, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "r", Activity: "a",
		Arguments: map[string]int{decomposed: 1}, KeyArguments: []string{composed}})
	require.NoError(t, err, "a typed map too")
	assert.Equal(t, k1, k3)

	_, err = keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "r", Activity: "a",
		Arguments: map[string]any{decomposed: 1, composed: 2}, KeyArguments: []string{composed}})
	require.ErrorIs(t, err, keyspace.ErrUnencodable, "two names equal after normalisation are ambiguous")
}

// C13: a struct embedding time.Time is, on the wire, that time: siblings
// vanish. Its key is the time's, under the time rule.
func TestEmbeddedTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
	v := withTime{Time: at, Flight: "BA117"}
	assert.Equal(t, derive(t, at), derive(t, v), "an embedded time.Time is the time")
	assert.Equal(t, derive(t, v), derive(t, withTime{Time: at, Flight: "LH1"}), "siblings are not on the wire")
	assert.Equal(t, derive(t, at.UTC()), derive(t, v), "the zone offset does not count, as for time.Time")

	names, err := keyspace.FieldNames(reflect.TypeFor[withTime]())
	require.ErrorIs(t, err, keyspace.ErrInvalidInput, "its fields are not JSON members: %v", names)
	assert.Contains(t, err.Error(), "time")
}

type dupRaw struct {
	R json.RawMessage `json:"r"`
}

// C14: duplicate object members and years json.Marshal refuses.
func TestRefusesWhatJSONCannotSayOnce(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"DuplicateMembers":       json.RawMessage(`{"a":1,"a":2}`),
		"NestedDuplicateMembers": dupRaw{R: json.RawMessage(`{"x":[{"b":1,"b":1}]}`)},
		"YearAbove9999":          time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		"YearBelow0":             time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		"YearAbove9999InUTC":     time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("W", -3600)),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := deriveErr(v)
			require.ErrorIs(t, err, keyspace.ErrUnencodable)
		})
	}
	_, err := deriveErr(json.RawMessage(`{"a":1,"b":{"a":2}}`))
	require.NoError(t, err, "the same name in different objects is fine")
}

// C9: two different integers on the wire never share a key. A float that
// may stand for several wire integers is refused.
func TestIntegersExactOnEveryPath(t *testing.T) {
	t.Parallel()
	// What Temporal's converter hands an `any` parameter for
	// {"n":9007199254740993} and {"n":9007199254740992}: one float64.
	var a, b map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"n":9007199254740993}`), &a))
	require.NoError(t, json.Unmarshal([]byte(`{"n":9007199254740992}`), &b))
	require.Equal(t, a, b, "the converter already lost the difference")
	_, err := deriveErr(a)
	require.ErrorIs(t, err, keyspace.ErrUnencodable, "an integral float beyond 2^53 is ambiguous")
	assert.Contains(t, err.Error(), "2^53")
	_, err = deriveErr(float32(1 << 24))
	require.ErrorIs(t, err, keyspace.ErrUnencodable, "float32 beyond 2^24 too")

	assert.Equal(t, derive(t, int64(1<<53-1)), derive(t, float64(1<<53-1)), "exact floats still agree with integers")
	assert.NotEqual(t, derive(t, json.Number("9007199254740993")), derive(t, json.Number("9007199254740992")))
	assert.NotEqual(t, derive(t, uint64(9007199254740993)), derive(t, uint64(9007199254740992)))
	assert.Equal(t, derive(t, 1.5e300/1e300), derive(t, 1.5), "fractional floats are unchanged")
}
