package keyspace_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"

	"github.com/tesserix/idempotency/keyspace"
)

// derive derives a key for a single key argument "a" holding v.
func derive(t *testing.T, v any) keyspace.Key {
	t.Helper()
	k, err := keyspace.Derive(keyspace.Input{
		Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments:    map[string]any{"a": v},
		KeyArguments: []string{"a"},
	})
	require.NoError(t, err)
	return k
}

type booking struct {
	Flight    string    `json:"flight"`
	Passenger string    `json:"passenger"`
	RequestID string    `json:"request_id"`
	Departure time.Time `json:"departure"`
}

type point struct {
	Y int `json:"y"`
	X int `json:"x"`
}

// rawObject marshals itself to a fixed JSON object.
type rawObject struct{}

func (rawObject) MarshalJSON() ([]byte, error) { return []byte(`{"y": 2, "x": 1.0}`), nil }

type quoted struct {
	N int     `json:"n,string"`
	F float64 `json:"f,string"`
	B bool    `json:"b,string"`
	S string  `json:"s,string"`
}

type withIface struct {
	V any `json:"v"`
}

func TestDeriveSpellingsAgree(t *testing.T) {
	t.Parallel()
	instant := time.Date(2026, 3, 1, 9, 30, 0, 123456789, time.UTC)
	paris := time.FixedZone("CET", 3600)
	nfc := "caf\u00e9"
	nfd := "cafe\u0301"
	f1e300, _ := new(big.Float).SetFloat64(1e300).Int(nil)
	big2 := big.NewInt(2)
	tests := []struct {
		name     string
		spelling []any
	}{
		{"two", []any{2, 2.0, int8(2), int16(2), int32(2), int64(2), uint(2), uint8(2), uint16(2), uint32(2), uint64(2), uintptr(2), float32(2),
			json.Number("2"), json.Number("2.0"), json.Number("20e-1"), json.Number("0.2E1"), json.Number("2.000e0"), big2, *big2}},
		{"zero and negative zero", []any{0, 0.0, math.Copysign(0, -1), float32(math.Copysign(0, -1)), json.Number("-0"), json.Number("0.000"), json.Number("-0e5"), json.Number(""), new(big.Int)}},
		{"negative", []any{-7, int8(-7), -7.0, json.Number("-7"), json.Number("-70e-1"), big.NewInt(-7)}},
		{"a tenth", []any{0.1, float32(0.1), json.Number("0.1"), json.Number("0.10"), json.Number("1e-1"), json.Number("1E-1"), json.Number("0.01e1")}},
		{"the float 1e300's exact integer", []any{f1e300, json.Number(f1e300.String())}},
		{"2^60", []any{int64(1) << 60, uint64(1) << 60, json.Number("1152921504606846976")}},
		{"largest exact float", []any{int64(1)<<53 - 1, float64(1<<53 - 1), json.Number("9007199254740991")}},
		{"min int64", []any{int64(math.MinInt64), json.Number("-9223372036854775808")}},
		{"max uint64", []any{uint64(math.MaxUint64), json.Number("18446744073709551615"), new(big.Int).SetUint64(math.MaxUint64)}},
		{"NFC and NFD strings", []any{nfc, nfd, norm.NFKC.String(nfd)}},
		{"NFC and NFD keys", []any{map[string]any{nfc: 1}, map[string]any{nfd: 1}, map[string]int{nfd: 1}}},
		{"key order and struct", []any{map[string]any{"x": 1, "y": 2}, map[string]any{"y": 2, "x": 1}, point{X: 1, Y: 2}, &point{X: 1, Y: 2}, rawObject{}, json.RawMessage(`{"x":1,"y":2}`)}},
		{"time at any zone and depth", []any{instant, instant.In(paris), &instant, "2026-03-01T09:30:00.123456789Z"}},
		{"time inside a struct", []any{withIface{V: instant.In(paris)}, map[string]any{"v": instant}, map[string]*time.Time{"v": &instant}}},
		{"bytes are base64", []any{[]byte("hi!"), "aGkh"}},
		{"null", []any{nil, []any(nil), map[string]any(nil), (*point)(nil), (*time.Time)(nil), (*big.Int)(nil), []byte(nil), json.RawMessage(`null`)}},
		{"empty list", []any{[]any{}, []int{}, [0]int{}, json.RawMessage(`[]`)}},
		{"byte array is a list", []any{[2]byte{1, 2}, []any{1, 2}, []uint16{1, 2}}},
		{"list spellings", []any{[]any{1, "x", true}, [3]any{1.0, "x", true}, json.RawMessage(` [1.0, "x", true] `)}},
		{"string option", []any{quoted{N: 5, F: 2.5, B: true, S: "q"}, map[string]any{"n": "5", "f": "2.5", "b": "true", "s": `"q"`}}},
		{"integer map keys", []any{map[int]string{1: "x", -2: "y"}, map[string]any{"1": "x", "-2": "y"}}},
		{"text marshaler", []any{netip.MustParseAddr("192.0.2.1"), "192.0.2.1"}},
		{"invalid UTF-8 as encoding/json sends it", []any{"a\xffb", "a\ufffdb"}},
		{"interface values", []any{withIface{V: 3}, map[string]any{"v": 3.0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := derive(t, tt.spelling[0])
			for i, s := range tt.spelling[1:] {
				assert.Equal(t, want, derive(t, s), "spelling %d (%T %#v)", i+1, s, s)
			}
		})
	}
}

func TestDeriveExcludesOtherArguments(t *testing.T) {
	t.Parallel()
	in := func(args any, keys ...string) keyspace.Input {
		return keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book", Arguments: args, KeyArguments: keys}
	}
	dep := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		a, b keyspace.Input
	}{
		{"request id differs", in(map[string]any{"flight": "BA117", "request_id": "a"}, "flight"), in(map[string]any{"flight": "BA117", "request_id": "b"}, "flight")},
		{"struct and map", in(booking{Flight: "BA117", RequestID: "a", Departure: dep}, "flight", "departure"), in(map[string]any{"flight": "BA117", "departure": dep, "x": 1}, "departure", "flight")},
		{"pointer to struct", in(&booking{Flight: "BA117"}, "flight"), in(booking{Flight: "BA117", RequestID: "z"}, "flight")},
		{"key argument order", in(map[string]any{"a": 1, "b": 2}, "a", "b"), in(map[string]any{"a": 1, "b": 2}, "b", "a")},
		{"no key arguments", in(map[string]any{"a": 1}), in(booking{Flight: "x"})},
		{"nil arguments without key arguments", in(nil), in(map[string]string{"a": "b"})},
		{"typed map", in(map[string]string{"flight": "BA117"}, "flight"), in(map[string]any{"flight": "BA117"}, "flight")},
		{"marshaler arguments", in(rawObject{}, "x"), in(map[string]any{"x": 1}, "x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ka, err := keyspace.Derive(tt.a)
			require.NoError(t, err)
			kb, err := keyspace.Derive(tt.b)
			require.NoError(t, err)
			assert.Equal(t, ka, kb)
		})
	}
}

func TestDeriveDistinguishes(t *testing.T) {
	t.Parallel()
	one := func(v any) keyspace.Input {
		return keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": v}, KeyArguments: []string{"a"}}
	}
	bigA, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	bigB, _ := new(big.Int).SetString("123456789012345678901234567891", 10)
	inputs := map[string]keyspace.Input{
		"tenant a run bc":    {Tenant: "a", Run: "bc", Activity: "x"},
		"tenant ab run c":    {Tenant: "ab", Run: "c", Activity: "x"},
		"run c activity x":   {Tenant: "ab", Run: "cx", Activity: "y"},
		"activity differs":   {Tenant: "a", Run: "bc", Activity: "y"},
		"tenant case":        {Tenant: "A", Run: "bc", Activity: "x"},
		"tenant NFD":         {Tenant: "cafe\u0301", Run: "bc", Activity: "x"},
		"tenant NFC":         {Tenant: "caf\u00e9", Run: "bc", Activity: "x"},
		"null":               one(nil),
		"empty string":       one(""),
		"zero":               one(0),
		"false":              one(false),
		"true":               one(true),
		"one":                one(1),
		"minus one":          one(-1),
		"string 1":           one("1"),
		"string true":        one("true"),
		"string null":        one("null"),
		"empty list":         one([]any{}),
		"empty object":       one(map[string]any{}),
		"list of null":       one([]any{nil}),
		"object with null":   one(map[string]any{"": nil}),
		"2^53+1":             one(int64(9007199254740993)),
		"2^53":               one(int64(9007199254740992)),
		"big a":              one(bigA),
		"big b":              one(bigB),
		"big b+1e1":          one(json.Number("1234567890123456789012345678910")),
		"float64 of float32": one(float64(float32(0.1))),
		"a tenth":            one(0.1),
		"1.5":                one(1.5),
		"15":                 one(15),
		"0.15":               one(0.15),
		"tiny":               one(json.Number("1e-400")),
		"huge":               one(json.Number("1e400")),
		"1e300 decimal":      one(json.Number("1e300")),
		"0.0015 float":       one(0.0015),
		"lower a":            one("a"),
		"upper a":            one("A"),
		"list 1 [2]":         one([]any{1, []any{2}}),
		"list [1] 2":         one([]any{[]any{1}, 2}),
		"list 1 2":           one([]any{1, 2}),
		"list 12":            one([]any{12}),
		"list '1' '2'":       one([]any{"1", "2"}),
		"list '12'":          one([]any{"12"}),
		"object a.b":         one(map[string]any{"a.b": 1}),
		"nested a b":         one(map[string]any{"a": map[string]any{"b": 1}}),
		"object ab:1":        one(map[string]any{"ab": 1}),
		"object a:b1":        one(map[string]any{"a": "b1"}),
		"two arguments":      {Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": 1, "b": 2}, KeyArguments: []string{"a", "b"}},
		"one argument b":     {Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"a": 1, "b": 2}, KeyArguments: []string{"b"}},
		"argument named b":   {Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"b": 1}, KeyArguments: []string{"b"}},
		"no arguments":       {Tenant: "t", Run: "r", Activity: "a"},
		"time":               one(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		"time plus 1ns":      one(time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC)),
		"bytes":              one([]byte{1, 2}),
	}
	seen := map[keyspace.Key]string{}
	for name, in := range inputs {
		k, err := keyspace.Derive(in)
		require.NoError(t, err, name)
		if other, dup := seen[k]; dup {
			t.Errorf("%q and %q derive the same key %s", name, other, k)
		}
		seen[k] = name
	}
}

// Deriving must keep producing the keys v1 produced: a stored key is a
// compatibility promise. A change here needs a new Version.
func TestDeriveIsStable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   keyspace.Input
		want keyspace.Key
	}{
		{"booking", keyspace.Input{
			Tenant: "acme", Run: "run_1", Activity: "book",
			Arguments:    map[string]any{"flight": "BA117", "request_id": "a", "fare": 129.5, "seats": []any{"12A", "12B"}, "when": time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)},
			KeyArguments: []string{"flight", "fare", "seats", "when"},
		}, "v1:cfeea8a5837102c049f6c0ab074c1c5b3c08b9e82ddd6532a746d7ae59d0fa8a"},
		{"no arguments", keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "lookup"}, "v1:66037119ab6e869b421cdb8491121c96585af12f56a6e7e82e2f8f06c2e49e25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := keyspace.Derive(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, k)
		})
	}
}

func TestDeriveIsDeterministic(t *testing.T) {
	t.Parallel()
	m := map[string]any{}
	for i := range 200 {
		m[strings.Repeat("k", i%7)+string(rune('a'+i%26))+string(rune('0'+i%10))] = i
	}
	first := derive(t, m)
	for range 20 {
		require.Equal(t, first, derive(t, m))
	}
}

type embeddedNil struct {
	*point
	Name string `json:"name"`
}

type omitting struct {
	Empty   string    `json:"empty,omitempty"`
	Zero    int       `json:"zero,omitempty"`
	NilPtr  *int      `json:"nil_ptr"`
	OmitPtr *int      `json:"omit_ptr,omitempty"`
	When    time.Time `json:"when,omitzero"`
	Skip    string    `json:"-"`
	//lint:ignore SA5008 a field named "-" is the encoding/json rule under test
	Dash   string `json:"-,"`
	hidden string
}

type badMarshaler struct{}

func (badMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("boom") }

type invalidMarshaler struct{}

func (invalidMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"a":`), nil }

type node struct {
	Next *node `json:"next"`
}

func TestDeriveErrors(t *testing.T) {
	t.Parallel()
	valid := keyspace.Input{Tenant: "t", Run: "r", Activity: "a"}
	with := func(args any, keys ...string) keyspace.Input {
		in := valid
		in.Arguments, in.KeyArguments = args, keys
		return in
	}
	one := func(v any) keyspace.Input { return with(map[string]any{"arg": v}, "arg") }

	cyclicMap := map[string]any{}
	cyclicMap["self"] = cyclicMap
	cyclicSlice := []any{nil}
	cyclicSlice[0] = cyclicSlice
	cyclicNode := &node{}
	cyclicNode.Next = cyclicNode
	deep := any(1)
	for range 10_001 {
		deep = []any{deep}
	}
	x := 1

	tests := []struct {
		name     string
		in       keyspace.Input
		sentinel error
		target   any // pointer to the typed error expected
		check    func(t *testing.T, err error)
		message  string // substring of the message
	}{
		{name: "empty tenant", in: keyspace.Input{Run: "r", Activity: "a"}, sentinel: keyspace.ErrInvalidInput, message: "Tenant",
			check: func(t *testing.T, err error) { assertInput(t, err, "Tenant") }},
		{name: "empty run", in: keyspace.Input{Tenant: "t", Activity: "a"}, sentinel: keyspace.ErrInvalidInput,
			check: func(t *testing.T, err error) { assertInput(t, err, "Run") }},
		{name: "empty activity", in: keyspace.Input{Tenant: "t", Run: "r"}, sentinel: keyspace.ErrInvalidInput,
			check: func(t *testing.T, err error) { assertInput(t, err, "Activity") }},
		{name: "arguments a number", in: with(5), sentinel: keyspace.ErrInvalidInput,
			check: func(t *testing.T, err error) { assertInput(t, err, "Arguments") }},
		{name: "arguments a list", in: with([]any{1}, "0"), sentinel: keyspace.ErrInvalidInput, message: "[]interface {}"},
		{name: "arguments a map with int keys", in: with(map[int]any{1: 1}), sentinel: keyspace.ErrInvalidInput, message: "keys must be strings"},
		{name: "arguments a time", in: with(time.Now()), sentinel: keyspace.ErrInvalidInput, message: "not an object"},
		{name: "duplicate key argument", in: with(map[string]any{"a": 1}, "a", "a"), sentinel: keyspace.ErrInvalidInput, message: `"a" appears twice`},
		{name: "key arguments equal after NFC", in: with(map[string]any{}, "caf\u00e9", "cafe\u0301"), sentinel: keyspace.ErrInvalidInput, message: "NFC"},
		{name: "empty key argument", in: with(map[string]any{"": 1}, ""), sentinel: keyspace.ErrInvalidInput, message: "empty"},
		{name: "missing map key", in: with(map[string]any{"flight": 1}, "flight", "seat"), sentinel: keyspace.ErrMissingArgument,
			check: func(t *testing.T, err error) { assertMissing(t, err, "seat") }},
		{name: "missing typed map key", in: with(map[string]int{}, "seat"), sentinel: keyspace.ErrMissingArgument, message: `"seat"`},
		{name: "nil arguments", in: with(nil, "flight"), sentinel: keyspace.ErrMissingArgument, message: `"flight"`},
		{name: "nil struct pointer", in: with((*booking)(nil), "flight"), sentinel: keyspace.ErrMissingArgument, message: `"flight"`},
		{name: "unknown field", in: with(booking{}, "seat"), sentinel: keyspace.ErrMissingArgument,
			check: func(t *testing.T, err error) { assertMissing(t, err, "seat") }},
		{name: "unexported field", in: with(omitting{hidden: "x"}, "hidden"), sentinel: keyspace.ErrMissingArgument},
		{name: "dash field", in: with(omitting{Skip: "x"}, "Skip"), sentinel: keyspace.ErrMissingArgument},
		{name: "omitempty zero", in: with(omitting{}, "zero"), sentinel: keyspace.ErrMissingArgument,
			check: func(t *testing.T, err error) { assertMissing(t, err, "zero") }},
		{name: "omitempty empty string", in: with(omitting{}, "empty"), sentinel: keyspace.ErrMissingArgument},
		{name: "omitempty nil pointer", in: with(omitting{}, "omit_ptr"), sentinel: keyspace.ErrMissingArgument},
		{name: "omitzero zero time", in: with(omitting{}, "when"), sentinel: keyspace.ErrMissingArgument},
		{name: "field behind a nil embedded pointer", in: with(embeddedNil{}, "x"), sentinel: keyspace.ErrMissingArgument},
		{name: "NaN", in: one(math.NaN()), sentinel: keyspace.ErrUnencodable,
			check: func(t *testing.T, err error) { assertValue(t, err, "arg", "") }},
		{name: "+Inf", in: one(math.Inf(1)), sentinel: keyspace.ErrUnencodable, message: "+Inf"},
		{name: "-Inf float32", in: one(float32(math.Inf(-1))), sentinel: keyspace.ErrUnencodable, message: "-Inf"},
		{name: "NaN in a struct field", in: with(struct {
			F float64 `json:"f"`
		}{math.NaN()}, "f"), sentinel: keyspace.ErrUnencodable, check: func(t *testing.T, err error) { assertValue(t, err, "f", "") }},
		{name: "channel deep inside", in: one(map[string]any{"a/b": []any{1, make(chan int)}}), sentinel: keyspace.ErrUnencodable,
			check: func(t *testing.T, err error) { assertValue(t, err, "arg", "/a~1b/1") }},
		{name: "func", in: one([]any{func() {}}), sentinel: keyspace.ErrUnencodable, check: func(t *testing.T, err error) { assertValue(t, err, "arg", "/0") }},
		{name: "complex", in: one(complex(1, 2)), sentinel: keyspace.ErrUnencodable, message: "complex128"},
		{name: "unsafe pointer", in: one(unsafe.Pointer(&x)), sentinel: keyspace.ErrUnencodable, message: "unsafe.Pointer"},
		{name: "struct map keys", in: one(map[point]int{{}: 1}), sentinel: keyspace.ErrUnencodable, message: "keys of type"},
		{name: "cyclic map", in: one(cyclicMap), sentinel: keyspace.ErrUnencodable, message: "cycle"},
		{name: "cyclic slice", in: one(cyclicSlice), sentinel: keyspace.ErrUnencodable, message: "cycle"},
		{name: "cyclic pointer", in: one(cyclicNode), sentinel: keyspace.ErrUnencodable, message: "cycle"},
		{name: "too deep", in: one(deep), sentinel: keyspace.ErrUnencodable, message: "deeper than"},
		{name: "keys equal after NFC", in: one(map[string]any{"caf\u00e9": 1, "cafe\u0301": 2}), sentinel: keyspace.ErrUnencodable, message: "NFC"},
		{name: "typed keys equal after NFC", in: one(map[string]int{"caf\u00e9": 1, "cafe\u0301": 2}), sentinel: keyspace.ErrUnencodable, message: "NFC"},
		{name: "failing MarshalJSON", in: one(badMarshaler{}), sentinel: keyspace.ErrUnencodable, message: "boom"},
		{name: "invalid MarshalJSON", in: one(invalidMarshaler{}), sentinel: keyspace.ErrUnencodable, message: "invalid JSON"},
		{name: "malformed json.Number", in: one(json.Number("0x10")), sentinel: keyspace.ErrUnencodable, message: "not a valid JSON number"},
		{name: "leading zero json.Number", in: one(json.Number("01")), sentinel: keyspace.ErrUnencodable, message: "leading zero"},
		{name: "huge exponent", in: one(json.Number("1e99999999999")), sentinel: keyspace.ErrUnencodable, message: "exponent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var k keyspace.Key
			var err error
			require.NotPanics(t, func() { k, err = keyspace.Derive(tt.in) })
			require.Error(t, err)
			assert.Empty(t, k)
			assert.ErrorIs(t, err, tt.sentinel)
			for _, other := range []error{keyspace.ErrInvalidInput, keyspace.ErrMissingArgument, keyspace.ErrUnencodable} {
				if other != tt.sentinel {
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.Contains(t, err.Error(), tt.message)
			if tt.check != nil {
				tt.check(t, err)
			}
		})
	}
}

func assertInput(t *testing.T, err error, field string) {
	t.Helper()
	var ie *keyspace.InputError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, field, ie.Field)
	assert.Contains(t, err.Error(), field)
}

func assertMissing(t *testing.T, err error, name string) {
	t.Helper()
	var me *keyspace.MissingArgumentError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, name, me.Name)
	assert.Contains(t, err.Error(), `"`+name+`"`)
}

func assertValue(t *testing.T, err error, argument, path string) {
	t.Helper()
	var ve *keyspace.ValueError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, argument, ve.Argument)
	assert.Equal(t, path, ve.Path)
	assert.NotEmpty(t, ve.Reason)
	assert.Contains(t, err.Error(), `"`+argument+`"`)
	assert.Contains(t, err.Error(), path)
}

func TestDeriveNilPointerFieldIsPresent(t *testing.T) {
	t.Parallel()
	k, err := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: omitting{}, KeyArguments: []string{"nil_ptr"}})
	require.NoError(t, err)
	want, err := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"nil_ptr": nil}, KeyArguments: []string{"nil_ptr"}})
	require.NoError(t, err)
	assert.Equal(t, want, k)

	seven := 7
	k, err = keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: omitting{OmitPtr: &seven, Dash: "d"}, KeyArguments: []string{"omit_ptr", "-"}})
	require.NoError(t, err)
	want, err = keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"omit_ptr": 7, "-": "d"}, KeyArguments: []string{"omit_ptr", "-"}})
	require.NoError(t, err)
	assert.Equal(t, want, k)
}

type Inner struct {
	A int `json:"a"`
	B int
	D int
}

type inner2 struct {
	D int
	C int `json:"c"`
}

type Tagged struct {
	B int `json:"B"`
}

type outer struct {
	Inner
	*inner2
	Tagged
	B    string `json:"-"`
	Own  int    `json:"own,omitempty"`
	Self int
}

type conflict struct {
	Inner
	inner2
}

func TestFieldNames(t *testing.T) {
	t.Parallel()
	one := 1
	tests := []struct {
		name  string
		typ   reflect.Type
		want  []string
		value any // a value of typ that encoding/json emits every field of
	}{
		{"tags and dash", reflect.TypeFor[omitting](), []string{"empty", "zero", "nil_ptr", "omit_ptr", "when", "-"},
			omitting{Empty: "e", Zero: 1, OmitPtr: &one, When: time.Unix(1, 0)}},
		{"pointer to struct", reflect.TypeFor[*booking](), []string{"flight", "passenger", "request_id", "departure"}, &booking{}},
		// "D" is in Inner and inner2 at the same depth, both untagged: dropped.
		// "B": Inner.B (untagged) and Tagged.B (tagged) at the same depth: the tagged one wins.
		// Outer's own B is "-", so it does not hide them.
		{"embedded promotion and dominance", reflect.TypeFor[outer](), []string{"a", "B", "c", "own", "Self"},
			outer{inner2: &inner2{}, Own: 1}},
		{"conflict annihilates", reflect.TypeFor[conflict](), []string{"a", "B", "c"}, conflict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := keyspace.FieldNames(tt.typ)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.want, got)
			if tt.value != nil {
				// encoding/json agrees on the names.
				b, err := json.Marshal(tt.value)
				require.NoError(t, err)
				var m map[string]any
				require.NoError(t, json.Unmarshal(b, &m))
				var keys []string
				for k := range m {
					keys = append(keys, k)
				}
				assert.ElementsMatch(t, tt.want, keys, "encoding/json emits %s", b)
			}
		})
	}
	for _, typ := range []reflect.Type{nil, reflect.TypeFor[int](), reflect.TypeFor[map[string]any](), reflect.TypeFor[**booking]()} {
		_, err := keyspace.FieldNames(typ)
		assert.ErrorIs(t, err, keyspace.ErrInvalidInput, "%v", typ)
	}
}

func TestDeriveFieldsMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	v := outer{Inner: Inner{A: 1, B: 2}, inner2: &inner2{D: 3, C: 4}, Tagged: Tagged{B: 5}, B: "x", Own: 6, Self: 7}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	names, err := keyspace.FieldNames(reflect.TypeFor[outer]())
	require.NoError(t, err)
	k1, err := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: v, KeyArguments: names})
	require.NoError(t, err)
	k2, err := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Arguments: m, KeyArguments: names})
	require.NoError(t, err)
	assert.Equal(t, k2, k1, "struct and its encoding/json round trip: %s", b)
	// The whole struct as one argument agrees with its JSON too.
	assert.Equal(t, derive(t, m), derive(t, v))
	assert.Equal(t, derive(t, json.RawMessage(b)), derive(t, &v))
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	k, err := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a"})
	require.NoError(t, err)
	got, err := keyspace.ParseKey(k.String())
	require.NoError(t, err)
	assert.Equal(t, k, got)
	assert.Len(t, k.String(), 67)
	assert.True(t, strings.HasPrefix(k.String(), keyspace.Version+":"))

	hex := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name, in, message string
	}{
		{"empty", "", "got 0"},
		{"no prefix", "v1" + hex + "0", "prefix"},
		{"other version", "v2:" + hex, "prefix"},
		{"upper case", "v1:" + strings.ToUpper(hex), "not a lower-case hex digit"},
		{"short", "v1:" + hex[1:], "67 bytes"},
		{"long", "v1:" + hex + "0", "67 bytes"},
		{"non-hex", "v1:" + hex[:63] + "g", `"g"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := keyspace.ParseKey(tt.in)
			assert.Empty(t, k)
			assert.ErrorIs(t, err, keyspace.ErrInvalidInput)
			assert.ErrorContains(t, err, tt.message)
		})
	}
}

func TestDeriveConcurrent(t *testing.T) {
	t.Parallel()
	type rec struct {
		Next *rec       `json:"next"`
		Tags []string   `json:"tags"`
		At   *time.Time `json:"at"`
	}
	in := keyspace.Input{Tenant: "t", Run: "r", Activity: "a",
		Arguments: rec{Next: &rec{Tags: []string{"x"}}}, KeyArguments: []string{"next", "tags", "at"}}
	want, err := keyspace.Derive(in)
	require.NoError(t, err)
	done := make(chan keyspace.Key)
	for range 8 {
		go func() {
			k, _ := keyspace.Derive(in)
			done <- k
		}()
	}
	for range 8 {
		assert.Equal(t, want, <-done)
	}
}
