package keyspace

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The specification's vectors of this package (spec/vectors, see
// spec/SPEC.md): canonical.json, keys.json and checks.json, computed here
// with the real encoder and compared byte for byte with the files, so a
// change that alters one output fails. Run with -update to write them:
//
//	go test ./keyspace/ -run SpecVectors -update
var updateSpec = flag.Bool("update", false, "write the specification's vectors (spec/vectors) instead of checking them")

const specVectorsDir = "../spec/vectors"

// specFile is the envelope every vector file has.
type specFile[V any] struct {
	Version     int    `json:"version"`
	GeneratedBy string `json:"generated_by"`
	Vectors     []V    `json:"vectors"`
}

// checkSpecFile writes (under -update) or compares the vector file name.
func checkSpecFile[V any](t *testing.T, name, test string, vectors []V) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(specFile[V]{Version: 1, GeneratedBy: test, Vectors: vectors}))
	path := filepath.Join(specVectorsDir, name)
	if *updateSpec {
		require.NoError(t, os.MkdirAll(specVectorsDir, 0o755))
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		return
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to write it")
	require.Equal(t, b.String(), string(got), "%s differs from what the code computes: a change of the encoding is a new version (see the package documentation); if the file is the one that is wrong, run with -update", path)
}

// Number readings of a vector's JSON text (the "numbers" field).
const (
	// specNumbersFloat64 reads JSON as Temporal's default data converter
	// decodes it into an `any` parameter (and as JavaScript's JSON.parse
	// does): every number an IEEE-754 double, a member named twice keeping
	// its last value.
	specNumbersFloat64 = "float64"
	// specNumbersExact reads JSON as a json.RawMessage or json.Number
	// parameter is read: numbers exact at any size, a member named twice
	// refused.
	specNumbersExact = "exact"
)

// specDecode reads text as mode says.
func specDecode(t *testing.T, text, mode string) any {
	t.Helper()
	switch mode {
	case specNumbersFloat64:
		var v any
		require.NoError(t, json.Unmarshal([]byte(text), &v), text)
		return v
	case specNumbersExact:
		return json.RawMessage(text)
	}
	t.Fatalf("numbers %q", mode)
	return nil
}

// errorClass names the class of a derivation's failure, as SPEC.md lists
// them.
func errorClass(t *testing.T, err error) string {
	t.Helper()
	var (
		missing *MissingArgumentError
		input   *InputError
	)
	switch {
	case errors.As(err, &missing):
		return "missing-argument"
	case errors.As(err, &input):
		return "invalid-input"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "integral float"):
		return "unsafe-integer-float"
	case strings.Contains(msg, "equal after NFC normalisation"):
		return "nfc-duplicate-member"
	case strings.Contains(msg, "twice"):
		return "duplicate-member"
	case strings.Contains(msg, "no canonical form"):
		return "nan"
	case strings.Contains(msg, "not a valid JSON number"):
		return "number-range"
	}
	t.Fatalf("no class for %v", err)
	return ""
}

type canonicalVector struct {
	Name         string `json:"name"`
	Numbers      string `json:"numbers"`
	ValueJSON    string `json:"value_json"`
	CanonicalHex string `json:"canonical_hex,omitempty"`
	Error        string `json:"error,omitempty"`
}

// canonicalCases are the values of canonical.json: name, number reading,
// JSON text.
var canonicalCases = []struct{ name, numbers, value string }{
	{"null", specNumbersFloat64, `null`},
	{"false", specNumbersFloat64, `false`},
	{"true", specNumbersFloat64, `true`},
	{"zero", specNumbersFloat64, `0`},
	{"negative-zero", specNumbersFloat64, `-0`},
	{"zero-float-spelling", specNumbersFloat64, `0.0e5`},
	{"one", specNumbersFloat64, `1`},
	{"minus-one", specNumbersFloat64, `-1`},
	{"two-point-zero", specNumbersFloat64, `2.0`},
	{"hundred", specNumbersFloat64, `100`},
	{"minus-120", specNumbersFloat64, `-120`},
	{"one-and-a-half", specNumbersFloat64, `1.5`},
	{"quarter", specNumbersFloat64, `0.25`},
	{"point-one", specNumbersFloat64, `0.1`},
	{"point-one-plus-point-two", specNumbersFloat64, `0.30000000000000004`},
	{"fare", specNumbersFloat64, `120.50`},
	{"small", specNumbersFloat64, `1e-7`},
	{"tiny", specNumbersFloat64, `5e-324`},
	{"large-fraction", specNumbersFloat64, `123456.789e3`},
	{"twelve-digits", specNumbersFloat64, `123456789012`},
	{"max-safe-integer", specNumbersFloat64, `9007199254740991`},
	{"min-safe-integer", specNumbersFloat64, `-9007199254740991`},
	{"two-to-the-53", specNumbersFloat64, `9007199254740992`},
	{"beyond-safe-integer", specNumbersFloat64, `9007199254740993`},
	{"1e21", specNumbersFloat64, `1e21`},
	{"max-double", specNumbersFloat64, `1.7976931348623157e308`},
	{"empty-string", specNumbersFloat64, `""`},
	{"ascii", specNumbersFloat64, `"abc"`},
	{"digit-string", specNumbersFloat64, `"1"`},
	{"nul-byte", specNumbersFloat64, `"a\u0000b"`},
	{"nfc-precomposed", specNumbersFloat64, `"caf\u00e9"`},
	{"nfc-decomposed", specNumbersFloat64, `"cafe\u0301"`},
	{"angstrom-sign", specNumbersFloat64, `"\u212b"`},
	{"hangul-jamo", specNumbersFloat64, `"\u1100\u1161\u11a8"`},
	{"emoji", specNumbersFloat64, `"\ud83d\ude00"`},
	{"lone-surrogate", specNumbersFloat64, `"a\ud800b"`},
	{"long-string", specNumbersFloat64, `"` + strings.Repeat("0123456789", 20) + `"`},
	{"empty-list", specNumbersFloat64, `[]`},
	{"list", specNumbersFloat64, `[null,false,true,-120,0.25,0,"é"]`},
	{"nested-list", specNumbersFloat64, `[[],[[1]],{}]`},
	{"empty-object", specNumbersFloat64, `{}`},
	{"object-sorted", specNumbersFloat64, `{"b":1,"a":2}`},
	{"object-member-order", specNumbersFloat64, `{"a":2,"b":1}`},
	{"object-byte-order", specNumbersFloat64, `{"é":1,"z":2,"Z":3,"aa":4,"a":5}`},
	{"object-nfc-member", specNumbersFloat64, `{"cafe\u0301":true}`},
	{"object-nfc-collision", specNumbersFloat64, `{"caf\u00e9":1,"cafe\u0301":2}`},
	{"object-nested", specNumbersFloat64, `{"passenger":{"name":"Ada","age":36,"tags":["vip"]},"seats":["12A","12B"]}`},
	{"object-duplicate-last-wins", specNumbersFloat64, `{"a":1,"a":2}`},
	{"exact-beyond-safe-integer", specNumbersExact, `9007199254740993`},
	{"exact-huge-integer", specNumbersExact, `123456789012345678901234567890`},
	{"exact-trailing-zeros", specNumbersExact, `1.10`},
	{"exact-two-point-zero", specNumbersExact, `2.0`},
	{"exact-exponent", specNumbersExact, `12.5E+3`},
	{"exact-large-exponent", specNumbersExact, `1e400`},
	{"exact-negative-zero", specNumbersExact, `-0.0`},
	{"exact-point-one", specNumbersExact, `0.1`},
	{"exact-object", specNumbersExact, `{"n":9007199254740993,"m":[1.0,-2.50]}`},
	{"exact-duplicate-member", specNumbersExact, `{"a":1,"a":2}`},
	{"exact-nested-duplicate-member", specNumbersExact, `[{"x":{"k":1,"k":1}}]`},
}

func TestSpecVectorsCanonical(t *testing.T) {
	seen := map[string]bool{}
	var out []canonicalVector
	for _, c := range canonicalCases {
		require.False(t, seen[c.name], c.name)
		seen[c.name] = true
		v := canonicalVector{Name: c.name, Numbers: c.numbers, ValueJSON: c.value}
		e := getEncoder()
		e.buf = e.buf[:0]
		err := e.encodeAny(specDecode(t, c.value, c.numbers))
		if err != nil {
			v.Error = errorClass(t, err)
		} else {
			v.CanonicalHex = hex.EncodeToString(e.buf)
		}
		putEncoder(e)
		out = append(out, v)
	}
	checkSpecFile(t, "canonical.json", "keyspace.TestSpecVectorsCanonical", out)
}

type specSecret struct {
	Generation  int    `json:"generation"`
	SecretHex   string `json:"secret_hex"`
	Fingerprint string `json:"fingerprint"`
}

type keyVector struct {
	Name          string      `json:"name"`
	Tenant        string      `json:"tenant"`
	Run           string      `json:"run"`
	Activity      string      `json:"activity"`
	Numbers       string      `json:"numbers"`
	ArgumentsJSON string      `json:"arguments_json"`
	KeyArguments  []string    `json:"key_arguments"`
	Secret        *specSecret `json:"secret"`
	EncodingHex   string      `json:"encoding_hex,omitempty"`
	Key           string      `json:"key,omitempty"`
	Error         string      `json:"error,omitempty"`
}

type checkVector struct {
	Name           string      `json:"name"`
	Tenant         string      `json:"tenant"`
	Run            string      `json:"run"`
	Activity       string      `json:"activity"`
	Numbers        string      `json:"numbers"`
	ArgumentsJSON  string      `json:"arguments_json"`
	CheckArguments []string    `json:"check_arguments"`
	Secret         *specSecret `json:"secret"`
	Check          string      `json:"check,omitempty"`
	Error          string      `json:"error,omitempty"`
}

// specSecrets are the secrets of the keyed vectors, by generation: 32
// bytes 0x00…0x1f, and 40 bytes of 0xa5.
func specSecretOf(t *testing.T, generation int) (*Secret, *specSecret) {
	t.Helper()
	if generation == 0 {
		return nil, nil
	}
	var b []byte
	switch generation {
	case 1:
		for i := range 32 {
			b = append(b, byte(i))
		}
	case 2:
		b = bytes.Repeat([]byte{0xa5}, 40)
	default:
		t.Fatalf("no secret of generation %d", generation)
	}
	s, err := NewSecret(generation, b)
	require.NoError(t, err)
	return s, &specSecret{Generation: generation, SecretHex: hex.EncodeToString(b), Fingerprint: s.Fingerprint()}
}

const specRun = "0193a1b2-c3d4-7e5f-8a9b-000000000001"

// keyCases are the inputs of keys.json.
var keyCases = []struct {
	name, tenant, run, activity, numbers, args string
	keyArgs                                    []string
	generation                                 int
}{
	{"book-flight", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA117","request_id":"r-1"}`, []string{"flight"}, 0},
	{"book-flight-other-request-id", "acme", specRun, "Book", specNumbersFloat64, `{"request_id":"r-2","flight":"BA117"}`, []string{"flight"}, 0},
	{"book-flight-other-flight", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA118","request_id":"r-1"}`, []string{"flight"}, 0},
	{"book-other-tenant", "globex", specRun, "Book", specNumbersFloat64, `{"flight":"BA117"}`, []string{"flight"}, 0},
	{"book-other-run", "acme", "0193a1b2-c3d4-7e5f-8a9b-000000000002", "Book", specNumbersFloat64, `{"flight":"BA117"}`, []string{"flight"}, 0},
	{"other-activity", "acme", specRun, "Charge", specNumbersFloat64, `{"flight":"BA117"}`, []string{"flight"}, 0},
	{"two-key-arguments", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA117","seat":"12A","fare":120.5}`, []string{"seat", "flight"}, 0},
	{"two-key-arguments-other-order", "acme", specRun, "Book", specNumbersFloat64, `{"fare":120.5,"seat":"12A","flight":"BA117"}`, []string{"flight", "seat"}, 0},
	{"struct-argument", "acme", specRun, "Book", specNumbersFloat64,
		`{"flight":"BA117","passenger":{"name":"Ada","age":36,"tags":["vip"]},"fare":120.5,"when":"2026-12-03T09:00:00Z"}`,
		[]string{"flight", "passenger", "when"}, 0},
	{"number-spellings", "acme", specRun, "Charge", specNumbersFloat64, `{"cents":2.0,"account":"acc-1"}`, []string{"cents", "account"}, 0},
	{"number-spellings-integer", "acme", specRun, "Charge", specNumbersFloat64, `{"cents":2,"account":"acc-1"}`, []string{"cents", "account"}, 0},
	{"exact-big-integer", "acme", specRun, "Charge", specNumbersExact, `{"ref":12345678901234567890,"account":"acc-1"}`, []string{"ref"}, 0},
	{"unsafe-integer-float", "acme", specRun, "Charge", specNumbersFloat64, `{"ref":12345678901234567890}`, []string{"ref"}, 0},
	{"null-argument", "acme", specRun, "Book", specNumbersFloat64, `{"memo":null}`, []string{"memo"}, 0},
	{"nfc-key-argument-name", "acme", specRun, "Book", specNumbersFloat64, `{"cafe\u0301":"x"}`, []string{"caf\u00e9"}, 0},
	{"unicode-tenant", "zürich-ä", specRun, "Charge", specNumbersFloat64, `{"card":"karte-ä"}`, []string{"card"}, 0},
	{"identifiers-not-normalised", "cafe\u0301", specRun, "Book", specNumbersFloat64, `{"flight":"BA117"}`, []string{"flight"}, 0},
	{"no-key-arguments", "acme", specRun, "Notify", specNumbersFloat64, `{"to":"ada@example.com"}`, nil, 0},
	{"key-all-arguments", "acme", specRun, "Send", specNumbersFloat64, `{"arguments":["ada@example.com",3,{"urgent":true}]}`, []string{"arguments"}, 0},
	{"key-all-arguments-none", "acme", specRun, "Send", specNumbersFloat64, `{"arguments":[]}`, []string{"arguments"}, 0},
	{"missing-argument", "acme", specRun, "Book", specNumbersFloat64, `{"seat":"12A"}`, []string{"flight"}, 0},
	{"empty-tenant", "", specRun, "Book", specNumbersFloat64, `{"flight":"BA117"}`, []string{"flight"}, 0},
	{"keyed-generation-1", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA117","request_id":"r-1"}`, []string{"flight"}, 1},
	{"keyed-generation-2", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA117","request_id":"r-1"}`, []string{"flight"}, 2},
	{"keyed-low-entropy", "acme", specRun, "Charge", specNumbersFloat64, `{"last4":"4242","cents":12050}`, []string{"last4", "cents"}, 1},
}

func TestSpecVectorsKeys(t *testing.T) {
	var out []keyVector
	for _, c := range keyCases {
		secret, ss := specSecretOf(t, c.generation)
		v := keyVector{Name: c.name, Tenant: c.tenant, Run: c.run, Activity: c.activity, Numbers: c.numbers,
			ArgumentsJSON: c.args, KeyArguments: c.keyArgs, Secret: ss}
		if v.KeyArguments == nil {
			v.KeyArguments = []string{}
		}
		in := Input{Tenant: c.tenant, Run: c.run, Activity: c.activity, Arguments: specDecode(t, c.args, c.numbers),
			KeyArguments: c.keyArgs, Secret: secret}
		key, err := Derive(in)
		if err != nil {
			v.Error = errorClass(t, err)
		} else {
			v.Key = string(key)
			enc, err := encodeForTest(in)
			require.NoError(t, err, c.name)
			v.EncodingHex = hex.EncodeToString(enc)
		}
		out = append(out, v)
	}
	checkSpecFile(t, "keys.json", "keyspace.TestSpecVectorsKeys", out)
}

// checkCases are the inputs of checks.json.
var checkCases = []struct {
	name, tenant, run, activity, numbers, args string
	names                                      []string
	generation                                 int
}{
	{"fare", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":"120.50"}`, []string{"fare"}, 0},
	{"fare-other-value", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":"99"}`, []string{"fare"}, 0},
	{"fare-number", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":120.5}`, []string{"fare"}, 0},
	{"fare-absent", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120"}`, []string{"fare"}, 0},
	{"fare-null", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":null}`, []string{"fare"}, 0},
	{"two-names", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":120.5,"currency":"EUR"}`, []string{"fare", "currency"}, 0},
	{"two-names-one-absent", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","currency":"EUR"}`, []string{"currency", "fare"}, 0},
	{"nfc-name", "acme", specRun, "Book", specNumbersFloat64, `{"cafe\u0301":1}`, []string{"caf\u00e9"}, 0},
	{"unicode-tenant", "zürich-ä", specRun, "Charge", specNumbersFloat64, `{"card":"karte-ö","amount":"99"}`, []string{"amount"}, 0},
	{"keyed-generation-1", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":"120.50"}`, []string{"fare"}, 1},
	{"keyed-generation-2", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120","fare":"120.50"}`, []string{"fare"}, 2},
	{"keyed-absent", "acme", specRun, "Book", specNumbersFloat64, `{"flight":"BA120"}`, []string{"fare"}, 1},
	{"unsafe-integer-float", "acme", specRun, "Book", specNumbersFloat64, `{"fare":9007199254740993}`, []string{"fare"}, 0},
	{"no-names", "acme", specRun, "Book", specNumbersFloat64, `{"fare":1}`, nil, 0},
}

func TestSpecVectorsChecks(t *testing.T) {
	var out []checkVector
	for _, c := range checkCases {
		secret, ss := specSecretOf(t, c.generation)
		v := checkVector{Name: c.name, Tenant: c.tenant, Run: c.run, Activity: c.activity, Numbers: c.numbers,
			ArgumentsJSON: c.args, CheckArguments: c.names, Secret: ss}
		if v.CheckArguments == nil {
			v.CheckArguments = []string{}
		}
		check, err := DeriveCheck(CheckInput{Tenant: c.tenant, Run: c.run, Activity: c.activity,
			Arguments: specDecode(t, c.args, c.numbers), Names: c.names, Secret: secret})
		if err != nil {
			v.Error = errorClass(t, err)
		} else {
			v.Check = string(check)
		}
		out = append(out, v)
	}
	checkSpecFile(t, "checks.json", "keyspace.TestSpecVectorsChecks", out)
}
