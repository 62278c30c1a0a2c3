package keyspace_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/compat"
	"github.com/tesserix/idempotency/keyspace"
)

// The compatibility fixtures of the keys (see internal/compat): each set
// under testdata/compat holds keys.json, inputs of Derive and the keys that
// release derived from them. The arguments are kept as the default data
// converter sends them (JSON), with the Go type the activity declares for
// them; a reader decodes them into that type, as the SDK does, and derives
// the key again.

const compatKeysJSON = "keys.json"

// The Go types the cases' arguments are declared as. They are frozen with
// the sets: a later release adds types, never changes these.
type (
	compatPassenger struct {
		Name string   `json:"name"`
		Age  int      `json:"age"`
		Tags []string `json:"tags"`
	}
	compatBooking struct {
		Flight    string          `json:"flight"`
		Passenger compatPassenger `json:"passenger"`
		Fare      float64         `json:"fare"`
		Discount  float32         `json:"discount"`
		Seats     []string        `json:"seats"`
		When      time.Time       `json:"when"`
		Extras    map[string]any  `json:"extras,omitempty"`
		RequestID string          `json:"request_id"`
	}
	compatTransfer struct {
		Account string      `json:"account"`
		Cents   int64       `json:"cents"`
		Ref     json.Number `json:"ref"`
		Memo    *string     `json:"memo"`
	}
)

// decodeAs decodes arguments into a fresh value of the Go type named
// goType, as the SDK's JSON payload converter does, and returns it.
func decodeAs(t testing.TB, goType string, arguments json.RawMessage) any {
	t.Helper()
	var v any
	switch goType {
	case "map[string]any":
		v = new(map[string]any)
	case "compatBooking":
		v = new(compatBooking)
	case "compatTransfer":
		v = new(compatTransfer)
	default:
		t.Fatalf("no Go type %q: the reader must know every type a set names", goType)
	}
	require.NoError(t, json.Unmarshal(arguments, v))
	return v
}

// compatKey is one case of a set.
type compatKey struct {
	Name         string   `json:"name"`
	Tenant       string   `json:"tenant"`
	Run          string   `json:"run"`
	Activity     string   `json:"activity"`
	KeyArguments []string `json:"key_arguments"`
	// GoType is the type the arguments are declared as.
	GoType    string          `json:"go_type"`
	Arguments json.RawMessage `json:"arguments"`
	// MapAgrees says that the arguments decoded into map[string]any (an
	// activity declared with a map) derive the same key.
	MapAgrees bool   `json:"map_agrees"`
	Key       string `json:"key"`
	// CheckNames are checked arguments, and Check the digest DeriveCheck
	// made of them (since r2).
	CheckNames []string `json:"check_names,omitempty"`
	Check      string   `json:"check,omitempty"`
}

type compatKeys struct {
	Cases []compatKey `json:"cases"`
}

// compatCases are the inputs a set freezes, with the Go values the
// arguments are.
func compatCases() []struct {
	c    compatKey
	args any
} {
	memo := "Miete März"
	booking := compatBooking{
		Flight:    "BA117",
		Passenger: compatPassenger{Name: "Zoe\u0308 Ångström", Age: 41, Tags: []string{"gold", "wheelchair"}},
		Fare:      1234.5,
		Discount:  0.1,
		Seats:     []string{"12A", "12B"},
		When:      time.Date(2026, 12, 24, 18, 30, 0, 123456000, time.UTC),
		Extras:    map[string]any{"meal": "vegan", "bags": 2.0, "insurance": true, "notes": nil},
		RequestID: "req-7f3a",
	}
	return []struct {
		c    compatKey
		args any
	}{
		{compatKey{Name: "doc-example", Tenant: "acme", Run: "run_1", Activity: "book",
			KeyArguments: []string{"flight"}, GoType: "map[string]any", MapAgrees: true},
			map[string]any{"flight": "BA117", "request_id": "a"}},
		{compatKey{Name: "no-key-arguments", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000001", Activity: "SendReport",
			GoType: "map[string]any", MapAgrees: true},
			map[string]any{"to": "ops@acme", "day": "2026-12-03"}},
		{compatKey{Name: "unicode", Tenant: "zürich-ä", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000002", Activity: "Überweisen",
			KeyArguments: []string{"empfänger", "name", "emoji"}, GoType: "map[string]any", MapAgrees: true},
			// "name" in NFD (e + combining diaeresis), a member name in NFD, an emoji beyond the BMP.
			map[string]any{"empf\u0061\u0308nger": "Jürgen", "name": "Zoe\u0308", "emoji": "✈️🛫", "betrag": 12}},
		{compatKey{Name: "floats", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000003", Activity: "Quote",
			KeyArguments: []string{"amount", "rate", "tiny", "negative_zero", "whole", "large"}, GoType: "map[string]any", MapAgrees: true},
			map[string]any{"amount": 2.0, "rate": 0.1, "tiny": 2.5e-8, "negative_zero": math.Copysign(0, -1), "whole": -17.0, "large": 123456789.125}},
		{compatKey{Name: "nested-struct", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000004", Activity: "Book",
			KeyArguments: []string{"flight", "passenger", "fare", "discount", "seats", "when", "extras"}, GoType: "compatBooking", MapAgrees: true},
			booking},
		{compatKey{Name: "checked", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000007", Activity: "Book",
			KeyArguments: []string{"flight", "when"}, GoType: "compatBooking", MapAgrees: true,
			CheckNames: []string{"passenger", "fare", "seats", "extras"}},
			booking},
		{compatKey{Name: "checked-absent", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000008", Activity: "Book",
			KeyArguments: []string{"flight"}, GoType: "compatBooking", MapAgrees: true,
			// Extras is omitempty and nil: absent.
			CheckNames: []string{"extras", "fare"}},
			compatBooking{Flight: "LH400", Fare: 99}},
		{compatKey{Name: "exact-integers", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000005", Activity: "Transfer",
			KeyArguments: []string{"account", "cents", "ref", "memo"}, GoType: "compatTransfer"},
			// Beyond 2^53: a map would read them as floats and refuse them.
			compatTransfer{Account: "DE89 3704 0044 0532 0130 00", Cents: 9007199254740993, Ref: "123456789012345678901234567890", Memo: &memo}},
		{compatKey{Name: "null-and-empty", Tenant: "acme", Run: "0193a1b2-c3d4-7e5f-8a9b-000000000006", Activity: "Transfer",
			KeyArguments: []string{"account", "memo"}, GoType: "compatTransfer", MapAgrees: true},
			compatTransfer{Account: "", Cents: 0, Ref: "0"}},
	}
}

// TestCompatWrite writes a new fixture set, with IDEMPOTENCY_WRITE_COMPAT
// naming it; see internal/compat.
func TestCompatWrite(t *testing.T) {
	set := compat.ToWrite(t)
	var out compatKeys
	for _, tc := range compatCases() {
		c := tc.c
		args, err := json.Marshal(tc.args)
		require.NoError(t, err)
		c.Arguments = args
		k, err := keyspace.Derive(keyspace.Input{Tenant: c.Tenant, Run: c.Run, Activity: c.Activity, Arguments: tc.args, KeyArguments: c.KeyArguments})
		require.NoError(t, err, c.Name)
		c.Key = string(k)
		if len(c.CheckNames) > 0 {
			ch, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: c.Tenant, Run: c.Run, Activity: c.Activity, Arguments: tc.args, Names: c.CheckNames})
			require.NoError(t, err, c.Name)
			c.Check = string(ch)
		}
		out.Cases = append(out.Cases, c)
	}
	set.WriteJSON(t, compatKeysJSON, out)
	set.WriteREADME(t, "keyspace", `inputs of keyspace.Derive and the keys it derived
(keys.json): tenant, run, activity, key arguments, and the arguments as the default
data converter sends them (JSON) with the Go type they are declared as (the types
are in keyspace/compat_test.go). Unicode in names and values (NFD, beyond the BMP),
floats, nested structs, integers beyond 2^53, null and empty values; and, from r2,
the digests keyspace.DeriveCheck made of checked arguments (check_names, check).`)
}

// Every committed set's inputs, decoded as the SDK decodes them, derive the
// keys that release derived (and, where the set says so, decoded into a
// map too): a key stored by an earlier release keeps matching. A change of
// the encoding fails here; the package documentation's version rule says
// what such a change must do.
func TestCompatRead(t *testing.T) {
	t.Parallel()
	for _, set := range compat.Sets(t) {
		t.Run(set.Name, func(t *testing.T) {
			t.Parallel()
			var keys compatKeys
			set.ReadJSON(t, compatKeysJSON, &keys)
			require.NotEmpty(t, keys.Cases)
			for _, c := range keys.Cases {
				_, err := keyspace.ParseKey(c.Key)
				assert.NoError(t, err, "%s: the frozen key", c.Name)
				in := keyspace.Input{Tenant: c.Tenant, Run: c.Run, Activity: c.Activity, KeyArguments: c.KeyArguments,
					Arguments: decodeAs(t, c.GoType, c.Arguments)}
				k, err := keyspace.Derive(in)
				if assert.NoError(t, err, c.Name) {
					assert.Equal(t, c.Key, string(k), "%s: the key of %s", c.Name, c.GoType)
				}
				if c.MapAgrees {
					in.Arguments = decodeAs(t, "map[string]any", c.Arguments)
					k, err := keyspace.Derive(in)
					if assert.NoError(t, err, c.Name) {
						assert.Equal(t, c.Key, string(k), "%s: the key of the arguments as a map", c.Name)
					}
				}
				if len(c.CheckNames) > 0 {
					for _, goType := range []string{c.GoType, "map[string]any"} {
						ch, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: c.Tenant, Run: c.Run, Activity: c.Activity,
							Arguments: decodeAs(t, goType, c.Arguments), Names: c.CheckNames})
						if assert.NoError(t, err, c.Name) {
							assert.Equal(t, c.Check, string(ch), "%s: the check of %s", c.Name, goType)
						}
					}
				}
			}
		})
	}
}

// The newest set holds every case this file writes, with the same inputs:
// a case added or changed here belongs in a new set.
func TestCompatWritesNewest(t *testing.T) {
	t.Parallel()
	newest := compat.Newest(compat.Sets(t))
	var keys compatKeys
	newest.ReadJSON(t, compatKeysJSON, &keys)
	cases := compatCases()
	require.Len(t, keys.Cases, len(cases), "the cases of %s", newest.Name)
	for i, tc := range cases {
		got := keys.Cases[i]
		want := tc.c
		args, err := json.Marshal(tc.args)
		require.NoError(t, err)
		assert.NoError(t, compat.Equal(got.Arguments, args), "%s: the arguments", want.Name)
		want.Arguments, want.Key, want.Check = got.Arguments, got.Key, got.Check
		assert.Equal(t, want, got)
		if len(want.CheckNames) > 0 {
			ch, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: want.Tenant, Run: want.Run, Activity: want.Activity, Arguments: tc.args, Names: want.CheckNames})
			if assert.NoError(t, err, want.Name) {
				assert.Equal(t, got.Check, string(ch), "%s: the check of the Go value", want.Name)
			}
		}
		k, err := keyspace.Derive(keyspace.Input{Tenant: want.Tenant, Run: want.Run, Activity: want.Activity, Arguments: tc.args, KeyArguments: want.KeyArguments})
		if assert.NoError(t, err, want.Name) {
			assert.Equal(t, got.Key, string(k), "%s: the key of the Go value", want.Name)
		}
	}
}
