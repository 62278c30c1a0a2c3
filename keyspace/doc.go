// Package keyspace derives canonical idempotency keys: a [Key] is the
// SHA-256 of a canonical binary encoding of a tenant, a workflow run, an
// activity name and the activity's key arguments.
//
//	key, err := keyspace.Derive(keyspace.Input{
//		Tenant:       "acme",
//		Run:          "run_1",
//		Activity:     "book",
//		Arguments:    map[string]any{"flight": "BA117", "request_id": "a"},
//		KeyArguments: []string{"flight"},
//	})
//
// Only the arguments named in [Input.KeyArguments] enter the key; a request
// id, a trace header or a regenerated timestamp is excluded, so a retry that
// renumbers itself derives the same key. The arguments are hashed, never
// stored. The package imports no Temporal code.
//
// # Canonical values
//
// Arguments are read the way Temporal's default JSON data converter sends
// them (encoding/json), then canonicalised, so two spellings of one payload
// are one key:
//
//   - Objects (maps with string, integer or TextMarshaler keys, and structs)
//     have their member names NFC-normalised and sorted by those bytes. Two
//     names that are equal after normalisation are refused.
//   - Strings are NFC-normalised; invalid UTF-8 bytes first become U+FFFD,
//     one for one, as encoding/json does.
//   - Numbers are compared by value: 2, 2.0, int8(2), uint64(2), float32(2),
//     json.Number("2") and json.Number("2.0") agree. Integers, *big.Int and
//     json.Number are exact at any size. An integral float below 2^53 in
//     magnitude (2^24 for float32) is its integer value; a fractional float
//     is the shortest decimal that reads back as the same float of its size
//     (strconv 'g', -1, with bitSize 32 for float32, so float32(0.1) agrees
//     with 0.1). -0 is 0. NaN and ±Inf are refused.
//   - Exact integers. Two different integers on the wire never share a key.
//     Temporal's default converter decodes every JSON number bound for an
//     `any` or map[string]any parameter into a float64, and from 2^53 up
//     neighbouring integers share a float ({"n":9007199254740993} and
//     {"n":9007199254740992} arrive as one value). Such an integral float
//     is therefore refused with a [*ValueError] rather than given a key that
//     two different effects would share: declare the parameter with an
//     integer type, json.Number or *big.Int, which keep every digit. The
//     cost is this refusal only; floats below the limit are unchanged.
//   - Booleans never equal numbers; null, "", 0, false, [] and {} are all
//     distinct.
//   - Structs follow encoding/json: json tags, "-", omitempty, omitzero,
//     embedded-field promotion with Go's dominance rules, unexported fields
//     skipped, and the ",string" option (the value's JSON text as a string),
//     which, as in encoding/json, gives way to a MarshalJSON or MarshalText
//     method whenever that method is called — for a pointer-receiver
//     method, only when the value is addressable.
//   - JSON text from a MarshalJSON method (json.RawMessage included) that
//     names a member of one object twice is refused: decoding would keep
//     one value silently.
//   - Names are NFC-normalised at every level, the key arguments' own
//     included: the key argument "café" finds a map member spelled
//     "cafe\u0301"; two members equal after normalisation are refused.
//   - time.Time (value or pointer, at any depth) is the string
//     t.UTC().Format(time.RFC3339Nano); this rule comes before the
//     Marshaler rules. A year outside 0–9999 (in the time's zone or in UTC),
//     which encoding/json refuses, is refused. A struct embedding time.Time
//     (or *time.Time) inherits its MarshalJSON, so on the wire it is that
//     time alone and its other fields vanish: its key is the time's, under
//     the same rule, and [FieldNames] refuses it (no key argument can name
//     one of its fields). A json.Marshaler's output is decoded (numbers as
//     json.Number) and canonicalised; an encoding.TextMarshaler is its text
//     as a string; big.Int, even by value, is its exact integer.
//   - []byte is its standard base64 string; other slices and arrays are
//     lists. A nil slice, nil map, nil pointer or nil interface is null; an
//     empty non-nil slice is an empty list.
//   - Pointers and interfaces are followed. Channels, functions, complex
//     numbers, unsafe pointers, maps with other key types, cycles and values
//     nested deeper than 10000 levels (through pointers, maps, slices and
//     interfaces alike) have no canonical form.
//
// A value with no canonical form fails with a [*ValueError] naming the key
// argument and the JSON Pointer path of the value. A method of the value
// that panics (a MarshalJSON, a promoted one meeting a nil embedded pointer)
// is recovered into a [*ValueError] naming the key argument: Derive never
// panics.
//
// # Arguments and key arguments
//
// [Input.Arguments] is a map with string keys or a struct (or a pointer to
// either; a type with its own JSON form is read as the object it marshals
// to). For a map, a key argument is a map key; for a struct, a JSON field
// name as [FieldNames] lists it. A map and a struct with the same JSON
// names and values derive the same key. A key argument the arguments do not
// carry — a missing map key, an unknown field name, or a field encoding/json
// would omit (omitempty or omitzero on a zero value) — fails with a
// [*MissingArgumentError]: no key can be derived. A nil pointer field
// without omitempty is present, as null.
//
// # Encoding (version v1)
//
// The hashed bytes are, in order:
//
//	field("github.com/tesserix/idempotency/keyspace v1")
//	field(Tenant) field(Run) field(Activity)
//	value(object of the key arguments)
//
// where field(s) is uvarint(len(s)) followed by the bytes of s, unchanged
// (identifiers are not normalised), and value is one of:
//
//	null     'n'
//	false    'f'
//	true     't'
//	number   'd' sign digits exponent
//	string   's' uvarint(len) bytes        (NFC, valid UTF-8)
//	list     '[' value* ']'
//	object   '{' ('s' uvarint(len) name value)* '}'   (names strictly ascending)
//
// A number ±D×10^E is sign '+' or '-', uvarint(len(D)) and the ASCII
// digits of D with no leading or trailing zero, then E as a zig-zag varint
// (encoding/binary's AppendVarint); zero is '+', no digits and exponent 0.
// uvarint is encoding/binary's AppendUvarint. Every value is self-delimiting
// and every field is length-prefixed, so two different inputs never share
// an encoding: tenant "a" with run "bc" differs from tenant "ab" with run
// "c", the string "1" from the number 1, a list of two values from two
// arguments.
//
// The key is [Version], ':' and the lower-case hexadecimal SHA-256 of those
// bytes; [ParseKey] checks that form.
//
// # Checks (version c1)
//
// [DeriveCheck] digests the arguments a declaration checks (arguments that
// are not part of the key but must match the call that made a record). Its
// values are canonicalised as a key's are; the hashed bytes are:
//
//	field("github.com/tesserix/idempotency/keyspace check c1")
//	field(Tenant) field(Run) field(Activity)
//	'{' ('s' uvarint(len) name (value | 'x'))* '}'   (names strictly ascending)
//
// where 'x' stands for a checked argument the arguments do not carry (or
// that encoding/json would omit): absent differs from null and from every
// value. A [Check] is "c1:", the first 8 bytes of the SHA-256 of
// field(domain) followed by field(name) for each sorted, normalised name,
// in 16 lower-case hexadecimal digits, ":", and the 64 lower-case
// hexadecimal digits of the SHA-256 of the bytes above: 84 bytes, never
// equal to a [Key]. The names' part lets two checks be compared only when
// they check the same arguments ([Check.Comparable]). The version rule
// below applies to checks as to keys, with [CheckVersion] in place of
// [Version].
//
// # Keyed derivation (versions k1 and c2)
//
// A SHA-256 digest hides nothing its reader can guess: the tenant, run and
// activity sit in the record beside the key, so whoever reads a record can
// try every likely value of a low-entropy argument (a card's last four
// digits, an amount in cents) and find the one that matches in
// milliseconds. Under a [Secret] ([Input.Secret], [CheckInput.Secret]) the
// same bytes are hashed with HMAC-SHA-256 keyed by the secret: the key is
// [KeyedVersion], ':' and its 64 hexadecimal digits, the check
// [KeyedCheckVersion] and the same names' part as a c1 check. Without the
// secret no value can be tried. Keyed and unkeyed keys never coincide, and
// a keyed and an unkeyed check are never compared.
//
// # Version rule
//
// Keys are a compatibility promise: a key stored under v1 must keep matching
// the key v1 derives for the same input, for as long as records are
// retained. Any change to the encoding or to the canonicalisation above —
// a tag, a prefix, how a type is read, how numbers or strings are
// normalised — is a new version: the [Version] prefix (and the domain
// string, which contains it) changes with it, so old and new keys never
// collide and never silently match.
package keyspace
