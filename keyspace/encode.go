package keyspace

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tags of the canonical encoding; see the package documentation.
const (
	tagNull      = 'n'
	tagFalse     = 'f'
	tagTrue      = 't'
	tagNumber    = 'd'
	tagString    = 's'
	tagList      = '['
	tagListEnd   = ']'
	tagObject    = '{'
	tagObjectEnd = '}'
)

// domain opens every encoding so that its bytes cannot be mistaken for any
// other use of SHA-256, and so that the version is part of what is hashed.
const domain = "github.com/tesserix/idempotency/keyspace " + Version

const (
	// cycleDepth is how deep values nest before the encoder starts
	// remembering the containers on its path to detect cycles; shallower
	// values cannot be cyclic without going deeper.
	cycleDepth = 64
	// maxDepth bounds nesting, cyclic or not.
	maxDepth = 10000
)

// encoder streams the canonical encoding into buf. Encoders are pooled; the
// scratch slices are stacks shared by nested containers.
type encoder struct {
	buf     []byte
	scratch []byte
	digits  []byte
	anyKV   []anyKV
	refKV   []refKV
	depth   int
	seen    map[seenKey]struct{}
	arg     string // the key argument being encoded, for errors
}

// memberKV is one member of an object being encoded: its NFC name, its name
// as given, and its value (any on the fast path, reflect.Value otherwise).
type memberKV[V any] struct {
	norm, key string
	val       V
}

type (
	anyKV = memberKV[any]
	refKV = memberKV[reflect.Value]
)

// sortMembers orders an object's members by their NFC names, and refuses
// two names that are equal after normalisation.
func sortMembers[V any](kvs []memberKV[V]) error {
	slices.SortFunc(kvs, func(a, b memberKV[V]) int { return strings.Compare(a.norm, b.norm) })
	for i := 1; i < len(kvs); i++ {
		if kvs[i-1].norm == kvs[i].norm {
			return unencodable("map keys %q and %q are equal after NFC normalisation, so the map has no canonical form", kvs[i-1].key, kvs[i].key)
		}
	}
	return nil
}

type argName struct {
	norm, name string
}

type seenKey struct {
	ptr uintptr
	n   int
	typ reflect.Type
}

var encoderPool = sync.Pool{New: func() any { return &encoder{buf: make([]byte, 0, 512)} }}

func getEncoder() *encoder { return encoderPool.Get().(*encoder) }

func putEncoder(e *encoder) {
	if cap(e.buf) > 64<<10 || cap(e.anyKV) > 1024 || cap(e.refKV) > 1024 {
		return // let an unusually large encoder go rather than pin its memory
	}
	e.buf = e.buf[:0]
	e.scratch = e.scratch[:0]
	clear(e.anyKV[:cap(e.anyKV)])
	e.anyKV = e.anyKV[:0]
	clear(e.refKV[:cap(e.refKV)])
	e.refKV = e.refKV[:0]
	e.depth = 0
	e.seen = nil
	e.arg = ""
	encoderPool.Put(e)
}

// enter is called on the way into a pointer, map or slice; past cycleDepth
// it remembers v's identity to refuse cycles.
func (e *encoder) enter(v reflect.Value) error {
	e.depth++
	if e.depth <= cycleDepth {
		return nil
	}
	if e.depth > maxDepth {
		return unencodable("values nested deeper than %d levels have no canonical form", maxDepth)
	}
	k := identity(v)
	if _, dup := e.seen[k]; dup {
		return unencodable("cycle: this %s contains itself, which has no canonical form", v.Type())
	}
	if e.seen == nil {
		e.seen = make(map[seenKey]struct{})
	}
	e.seen[k] = struct{}{}
	return nil
}

func (e *encoder) leave(v reflect.Value) {
	if e.depth > cycleDepth {
		delete(e.seen, identity(v))
	}
	e.depth--
}

func identity(v reflect.Value) seenKey {
	k := seenKey{ptr: v.Pointer(), typ: v.Type()}
	if v.Kind() == reflect.Slice {
		k.n = v.Len()
	}
	return k
}

// ---- scalars ----

func (e *encoder) writeNull() { e.buf = append(e.buf, tagNull) }
func (e *encoder) writeBool(b bool) {
	if b {
		e.buf = append(e.buf, tagTrue)
	} else {
		e.buf = append(e.buf, tagFalse)
	}
}

// writeString writes s as a string: valid UTF-8 (invalid bytes replaced by
// U+FFFD, as encoding/json does), NFC-normalised, length-prefixed.
func (e *encoder) writeString(s string) {
	if isASCII(s) {
		e.writeRaw(s)
		return
	}
	e.scratch = appendNFC(e.scratch[:0], s)
	e.buf = appendKey(e.buf, string(e.scratch))
}

// writeRaw writes s, already canonical, as a string.
func (e *encoder) writeRaw(s string) {
	e.buf = appendKey(e.buf, s)
}

// appendKey appends the encoding of an object key that is already
// normalised.
func appendKey(dst []byte, norm string) []byte {
	dst = append(dst, tagString)
	dst = binary.AppendUvarint(dst, uint64(len(norm)))
	return append(dst, norm...)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// appendNFC appends the canonical form of s: invalid UTF-8 bytes replaced by
// U+FFFD one for one (encoding/json's rule), then NFC.
func appendNFC(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		var b strings.Builder
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
		}
		s = b.String()
	}
	if norm.NFC.IsNormalString(s) {
		return append(dst, s...)
	}
	return norm.NFC.AppendString(dst, s)
}

// normalize returns the canonical form of s as a string, without
// allocating when s is already canonical.
func normalize(s string) string {
	if isASCII(s) {
		return s
	}
	if utf8.ValidString(s) && norm.NFC.IsNormalString(s) {
		return s
	}
	return string(appendNFC(nil, s))
}

func (e *encoder) writeTime(t time.Time) error {
	u := t.UTC()
	// encoding/json refuses a time whose year (in its own zone) is outside
	// 0–9999; the UTC form must fit RFC 3339 too.
	if y := t.Year(); y < 0 || y > 9999 {
		return unencodable("time %v has a year outside 0–9999, which JSON cannot carry", t)
	}
	if y := u.Year(); y < 0 || y > 9999 {
		return unencodable("time %v is in a year outside 0–9999 in UTC", t)
	}
	var a [64]byte
	b := u.AppendFormat(a[:0], time.RFC3339Nano)
	e.buf = appendKey(e.buf, string(b)) // no allocation: the conversion does not escape
	return nil
}

func (e *encoder) writeBytes(b []byte) {
	n := base64.StdEncoding.EncodedLen(len(b))
	buf := append(e.buf, tagString)
	buf = binary.AppendUvarint(buf, uint64(n))
	e.buf = base64.StdEncoding.AppendEncode(buf, b)
}

// ---- dynamic values ----

var (
	timeType       = reflect.TypeFor[time.Time]()
	bigIntType     = reflect.TypeFor[big.Int]()
	jsonNumberType = reflect.TypeFor[json.Number]()
	mapAnyType     = reflect.TypeFor[map[string]any]()
)

// encodeAny writes x, with a type switch for the types JSON decoding and
// ordinary Go code produce, and reflection for the rest.
func (e *encoder) encodeAny(x any) error {
	switch v := x.(type) {
	case nil:
		e.writeNull()
	case string:
		e.writeString(v)
	case bool:
		e.writeBool(v)
	case int:
		e.writeInt(int64(v))
	case int8:
		e.writeInt(int64(v))
	case int16:
		e.writeInt(int64(v))
	case int32:
		e.writeInt(int64(v))
	case int64:
		e.writeInt(v)
	case uint:
		e.writeUint(uint64(v))
	case uint8:
		e.writeUint(uint64(v))
	case uint16:
		e.writeUint(uint64(v))
	case uint32:
		e.writeUint(uint64(v))
	case uint64:
		e.writeUint(v)
	case uintptr:
		e.writeUint(uint64(v))
	case float64:
		return e.writeFloat(v, 64)
	case float32:
		return e.writeFloat(float64(v), 32)
	case json.Number:
		return e.writeJSONNumber(v)
	case time.Time:
		return e.writeTime(v)
	case *time.Time:
		if v == nil {
			e.writeNull()
		} else {
			return e.writeTime(*v)
		}
	case *big.Int:
		if v == nil {
			e.writeNull()
			return nil
		}
		return e.writeBigInt(v)
	case map[string]any:
		return e.encodeMapAny(v)
	case []byte:
		if v == nil {
			e.writeNull()
		} else {
			e.writeBytes(v)
		}
	default:
		rv := reflect.ValueOf(x)
		return typeEncoder(rv.Type())(e, rv)
	}
	return nil
}

func (e *encoder) encodeMapAny(m map[string]any) error {
	if m == nil {
		e.writeNull()
		return nil
	}
	rv := reflect.ValueOf(m)
	if err := e.enter(rv); err != nil {
		return err
	}
	start := len(e.anyKV)
	for k, v := range m {
		e.anyKV = append(e.anyKV, anyKV{norm: normalize(k), key: k, val: v})
	}
	end := len(e.anyKV)
	if err := sortMembers(e.anyKV[start:end]); err != nil {
		return err
	}
	e.buf = append(e.buf, tagObject)
	for i := start; i < end; i++ {
		kv := &e.anyKV[i] // re-read: nested maps may grow the stack
		e.buf = appendKey(e.buf, kv.norm)
		if err := e.encodeAny(kv.val); err != nil {
			return withSeg(err, pointerToken(e.anyKV[i].key))
		}
	}
	e.buf = append(e.buf, tagObjectEnd)
	clear(e.anyKV[start:end])
	e.anyKV = e.anyKV[:start]
	e.leave(rv)
	return nil
}

// decodeJSON decodes one JSON value with numbers kept as json.Number. An
// object that names a member twice is refused: decoding would keep one of
// the two values silently, so two different texts would share a key.
func decodeJSON(b []byte, x *any) error {
	if bytes.IndexByte(b, '{') >= 0 {
		if err := checkDuplicateMembers(b); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(x)
}

// checkDuplicateMembers reports the first object in the JSON text b that
// names a member twice.
func checkDuplicateMembers(b []byte) error {
	type frame struct {
		object    bool
		expectKey bool
		names     map[string]struct{}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if top != nil && top.object && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			name, _ := tok.(string)
			if _, dup := top.names[name]; dup {
				return fmt.Errorf("an object names the member %q twice", name)
			}
			top.names[name] = struct{}{}
			top.expectKey = false
			continue
		}
		if top != nil && top.object {
			top.expectKey = true // after this value, a name or the end
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, expectKey: true, names: map[string]struct{}{}})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// encodeJSON canonicalises JSON text produced by a MarshalJSON method.
func (e *encoder) encodeJSON(b []byte, t reflect.Type) error {
	if !json.Valid(b) {
		return unencodable("MarshalJSON of %s returned invalid JSON", t)
	}
	var x any
	if err := decodeJSON(b, &x); err != nil {
		return unencodable("decoding the JSON of %s: %v", t, err)
	}
	return e.encodeAny(x)
}
