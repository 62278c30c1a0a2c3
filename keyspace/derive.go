package keyspace

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Input is what a key is derived from.
type Input struct {
	// Tenant scopes the key; required. It is hashed byte for byte.
	Tenant string
	// Run is the workflow run the activity belongs to; required. It is
	// hashed byte for byte.
	Run string
	// Activity is the activity's registered name; required. It is hashed
	// byte for byte.
	Activity string
	// Arguments is a map with string keys (map[string]T) or a struct /
	// pointer to struct, read the way Temporal's default JSON data converter
	// would send it. A nil value, nil map or nil pointer carries no
	// arguments.
	Arguments any
	// KeyArguments names the arguments (map keys or JSON field names) that
	// identify the effect. Only those are encoded; everything else is
	// excluded entirely. Empty = no argument enters the key (one key per
	// tenant+run+activity). Order does not matter; a name must not be
	// empty or repeated.
	KeyArguments []string
	// Secret, when set, keys the derivation: the key is an HMAC-SHA-256
	// under it ([KeyedVersion]) instead of a SHA-256 ([Version]), so that
	// whoever reads it cannot try likely argument values against it. Nil
	// derives the unkeyed key.
	Secret *Secret
}

// Derive returns the idempotency key of in: the SHA-256 of the canonical
// encoding described in the package documentation, as a [Key] of the
// current [Version]; under [Input.Secret], the HMAC-SHA-256 of the same
// encoding keyed by the secret, as a [Key] of [KeyedVersion].
//
// Two inputs that are spellings of one payload (map keys in another order,
// strings in another Unicode normal form, 2 for 2.0, a struct for a map
// with the same JSON names) derive the same key; any other difference
// derives another key.
//
// Errors: [ErrInvalidInput] (as an [*InputError]) for a malformed input,
// [ErrMissingArgument] (as a [*MissingArgumentError]) when a key argument is
// absent, [ErrUnencodable] (as a [*ValueError]) when a key argument's value
// has no canonical form. Derive never panics on a value it cannot encode.
func Derive(in Input) (key Key, err error) {
	switch {
	case in.Tenant == "":
		return "", &InputError{Field: "Tenant", Reason: "must not be empty"}
	case in.Run == "":
		return "", &InputError{Field: "Run", Reason: "must not be empty"}
	case in.Activity == "":
		return "", &InputError{Field: "Activity", Reason: "must not be empty"}
	}
	e := getEncoder()
	defer func() {
		if p := recover(); p != nil {
			// A MarshalJSON, MarshalText or IsZero method of the caller's
			// panicked (or a promoted one met a nil embedded pointer). The
			// encoder's state is unknown: let it go rather than reuse it.
			key, err = "", &ValueError{Argument: e.arg, Reason: fmt.Sprintf("encoding the value panicked: %v", p)}
			return
		}
		putEncoder(e)
	}()
	if err := e.encodeInput(&in); err != nil {
		return "", err
	}
	if in.Secret != nil {
		return formatKeyAs(keyedPrefix, in.Secret.sum(e.buf)), nil
	}
	return formatKeyAs(keyPrefix, sha256.Sum256(e.buf)), nil
}

func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// maxStackNames is how many key arguments are sorted without allocating.
const maxStackNames = 16

func (e *encoder) encodeInput(in *Input) error {
	// The key arguments, in canonical order, checked for duplicates. They
	// are sorted in a stack array: no allocation, no write barriers.
	var stack [maxStackNames]argName
	names, err := sortedNames(stack[:0], in.KeyArguments, "KeyArguments")
	if err != nil {
		return err
	}

	buf := appendField(e.buf, domain)
	buf = appendField(buf, in.Tenant)
	buf = appendField(buf, in.Run)
	buf = appendField(buf, in.Activity)
	e.buf = append(buf, tagObject)
	if err := e.encodeArguments(in, names); err != nil {
		return err
	}
	e.buf = append(e.buf, tagObjectEnd)
	return nil
}

// sortedNames appends list to names, normalised, in canonical order, and
// refuses an empty name or two that are equal after normalisation; field
// names the list in errors.
func sortedNames(names []argName, list []string, field string) ([]argName, error) {
	if len(list) > cap(names) {
		names = make([]argName, 0, len(list))
	}
	for _, name := range list {
		if name == "" {
			return nil, &InputError{Field: field, Reason: "a key argument name is empty"}
		}
		names = append(names, argName{norm: normalize(name), name: name})
	}
	if len(names) <= maxStackNames {
		for i := 1; i < len(names); i++ { // insertion sort
			for j := i; j > 0 && names[j].norm < names[j-1].norm; j-- {
				names[j], names[j-1] = names[j-1], names[j]
			}
		}
	} else {
		slices.SortFunc(names, func(a, b argName) int { return strings.Compare(a.norm, b.norm) })
	}
	for i := 1; i < len(names); i++ {
		if a, b := names[i-1], names[i]; a.norm == b.norm {
			if a.name == b.name {
				return nil, &InputError{Field: field, Reason: "name " + strconv.Quote(a.name) + " appears twice"}
			}
			return nil, &InputError{Field: field, Reason: "names " + strconv.Quote(a.name) + " and " + strconv.Quote(b.name) + " are equal after NFC normalisation"}
		}
	}
	return names, nil
}

// missing reports the first declared key argument, for a deterministic
// error when the arguments carry none.
func missing(in *Input) error {
	if len(in.KeyArguments) == 0 {
		return nil
	}
	return &MissingArgumentError{Name: in.KeyArguments[0]}
}

func (e *encoder) encodeArguments(in *Input, names []argName) error {
	switch args := in.Arguments.(type) {
	case nil:
		return missing(in)
	case map[string]any:
		// Names are compared after NFC normalisation. Only a non-ASCII
		// name can have another spelling, so a map of ASCII names is read
		// directly.
		normalized := false
		for k := range args {
			if !isASCII(k) {
				normalized = true
				break
			}
		}
		for _, n := range names {
			v, ok := args[n.name]
			if !ok || normalized {
				var err error
				if v, err = lookupNormalized(args, n); err != nil {
					return err
				}
			}
			e.arg = n.name
			e.buf = appendKey(e.buf, n.norm)
			if err := e.encodeAny(v); err != nil {
				return valueError(n.name, err)
			}
		}
		return nil
	}

	v := reflect.ValueOf(in.Arguments)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return missing(in)
		}
		v = v.Elem()
	}
	p := planFor(v.Type())
	if p.marshaled || (p.marshaledAddr && v.CanAddr()) {
		return e.encodeMarshaledArguments(in, names, v)
	}
	switch p.kind {
	case reflect.Map:
		if v.IsNil() {
			return missing(in)
		}
		normalized := false
		for iter := v.MapRange(); iter.Next(); {
			if !isASCII(iter.Key().String()) {
				normalized = true
				break
			}
		}
		for _, n := range names {
			mv := v.MapIndex(reflect.ValueOf(n.name).Convert(p.key))
			if !mv.IsValid() || normalized {
				var err error
				if mv, err = lookupNormalizedValue(v, n); err != nil {
					return err
				}
			}
			e.arg = n.name
			e.buf = appendKey(e.buf, n.norm)
			if err := p.elem(e, mv); err != nil {
				return valueError(n.name, err)
			}
		}
		return nil
	case reflect.Struct:
		fields := p.si.fields
		for _, n := range names {
			f := p.si.field(n.name)
			if f < 0 && !isASCII(n.name) {
				for i := range fields {
					if normalize(fields[i].name) == n.norm {
						f = i
						break
					}
				}
			}
			if f < 0 {
				return &MissingArgumentError{Name: n.name}
			}
			fv, ok := fieldValue(v, fields[f].index)
			if !ok || fields[f].omitted(fv) {
				return &MissingArgumentError{Name: n.name}
			}
			e.arg = n.name
			e.buf = appendKey(e.buf, n.norm)
			if err := fields[f].enc(e, fv); err != nil {
				return valueError(n.name, err)
			}
		}
		return nil
	}
	return &InputError{Field: "Arguments", Reason: p.invalid}
}

// lookupNormalized finds the member of args whose name equals n after NFC
// normalisation, when no member is spelled exactly as n: names are
// normalised at every level, the top one included. Two members that are
// equal after normalisation are ambiguous.
func lookupNormalized(args map[string]any, n argName) (any, error) {
	var (
		found any
		name  string
		hits  int
	)
	for k, v := range args {
		if normalize(k) == n.norm {
			if hits++; hits > 1 {
				return nil, ambiguousNames(n.name, name, k)
			}
			found, name = v, k
		}
	}
	if hits == 0 {
		return nil, &MissingArgumentError{Name: n.name}
	}
	return found, nil
}

// lookupNormalizedValue is lookupNormalized for a map read by reflection.
func lookupNormalizedValue(m reflect.Value, n argName) (reflect.Value, error) {
	var (
		found reflect.Value
		name  string
		hits  int
	)
	iter := m.MapRange()
	for iter.Next() {
		k := iter.Key().String()
		if normalize(k) == n.norm {
			if hits++; hits > 1 {
				return reflect.Value{}, ambiguousNames(n.name, name, k)
			}
			found, name = iter.Value(), k
		}
	}
	if hits == 0 {
		return reflect.Value{}, &MissingArgumentError{Name: n.name}
	}
	return found, nil
}

func ambiguousNames(arg, a, b string) error {
	return &ValueError{Argument: arg, Reason: fmt.Sprintf("the arguments hold both %q and %q, which are equal after NFC normalisation", a, b)}
}

// argsPlan is the cached description of how to read arguments of one type.
type argsPlan struct {
	marshaled     bool         // the type has its own JSON or text form
	marshaledAddr bool         // its pointer has one
	kind          reflect.Kind // Map, Struct, or Invalid
	key           reflect.Type // map key type
	elem          encFunc      // map element encoder
	si            *structInfo  // struct fields, encoders built
	invalid       string       // why the type cannot be arguments
}

var planCache sync.Map // map[reflect.Type]*argsPlan

func planFor(t reflect.Type) *argsPlan {
	if p, ok := planCache.Load(t); ok {
		return p.(*argsPlan)
	}
	p := &argsPlan{
		marshaled:     t == timeType || t == bigIntType || t.Implements(marshalerType) || t.Implements(textMarshalerType),
		marshaledAddr: reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textMarshalerType),
	}
	switch t.Kind() {
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			p.invalid = "a map's keys must be strings, got " + t.String()
			break
		}
		p.kind, p.key, p.elem = reflect.Map, t.Key(), typeEncoder(t.Elem())
	case reflect.Struct:
		typeEncoder(t)
		p.kind, p.si = reflect.Struct, cachedStructInfo(t)
		// typeEncoder may hand back an encoder another goroutine is still
		// building; encoders waits for it, so the fields read below are set.
		p.si.encoders()
	default:
		p.invalid = "want a map with string keys or a struct, got " + t.String()
	}
	actual, _ := planCache.LoadOrStore(t, p)
	return actual.(*argsPlan)
}

// encodeMarshaledArguments handles arguments whose type has its own JSON
// form: they are read as the JSON object they marshal to.
func (e *encoder) encodeMarshaledArguments(in *Input, names []argName, v reflect.Value) error {
	if v.CanAddr() {
		v = v.Addr()
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return &InputError{Field: "Arguments", Reason: "marshalling " + v.Type().String() + ": " + err.Error()}
	}
	var x any
	if err := decodeJSON(b, &x); err != nil {
		return &InputError{Field: "Arguments", Reason: "decoding the JSON of " + v.Type().String() + ": " + err.Error()}
	}
	switch m := x.(type) {
	case nil:
		return missing(in)
	case map[string]any:
		sub := *in
		sub.Arguments = m
		return e.encodeArguments(&sub, names)
	}
	return &InputError{Field: "Arguments", Reason: v.Type().String() + " marshals to JSON that is not an object"}
}
