package keyspace

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// field is one JSON member of a struct type, found the way encoding/json
// finds it.
type field struct {
	name      string // JSON name as encoding/json emits it
	norm      string // name in NFC, the canonical object key
	tagged    bool   // name came from a json tag
	index     []int  // field index sequence through embedded structs
	typ       reflect.Type
	omitEmpty bool
	omitZero  bool
	quoted    bool                     // ",string" option that applies
	isZero    func(reflect.Value) bool // omitzero test when the type has IsZero
	keyBytes  []byte                   // the encoded object key: tag, length, NFC name
	enc       encFunc                  // set lazily, see structInfo.encoders
}

// structInfo is the cached description of a struct type.
type structInfo struct {
	fields []field        // in encoding/json's order (field index order)
	byName map[string]int // JSON name → position in fields
	sorted []int          // positions in fields, ordered by NFC name bytes
	dupNFC bool           // two names are equal after NFC normalisation
	once   sync.Once      // guards encoders
}

var structCache sync.Map // map[reflect.Type]*structInfo

func cachedStructInfo(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si, _ := structCache.LoadOrStore(t, newStructInfo(t))
	return si.(*structInfo)
}

// field returns the position of the field with JSON name name, or -1. A
// linear scan beats a map for the handful of fields a request has.
func (si *structInfo) field(name string) int {
	if len(si.fields) <= 16 {
		for i := range si.fields {
			if si.fields[i].name == name {
				return i
			}
		}
		return -1
	}
	if i, ok := si.byName[name]; ok {
		return i
	}
	return -1
}

// encoders fills in each field's encoder. It is separate from newStructInfo
// so that a recursive type's info can exist before its encoders do.
func (si *structInfo) encoders() {
	si.once.Do(func() {
		for i := range si.fields {
			f := &si.fields[i]
			if f.quoted {
				f.enc = quotedFieldEncoder(f.typ)
			} else {
				f.enc = typeEncoder(f.typ)
			}
		}
	})
}

// FieldNames returns the JSON member names of a struct type in the order
// encoding/json emits them: json tags honoured, "-" fields and unexported
// fields skipped, fields of embedded structs promoted under Go's dominance
// rules (a tagged name beats an untagged one at the same depth; ambiguous
// names are dropped). These are the names [Input.KeyArguments] refers to
// when the arguments are a struct. t may be a struct type or a pointer to
// one; any other type is an error matching [ErrInvalidInput].
func FieldNames(t reflect.Type) ([]string, error) {
	if t == nil {
		return nil, &InputError{Field: "type", Reason: "nil type, want a struct or a pointer to a struct"}
	}
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return nil, &InputError{Field: "type", Reason: t.String() + " is not a struct or a pointer to a struct"}
	}
	if _, _, ok := embeddedTime(st); ok {
		return nil, &InputError{Field: "type", Reason: t.String() + " marshals as the time.Time it embeds (its MarshalJSON is the time's): its fields are not JSON members"}
	}
	if !st.Implements(marshalerType) && !reflect.PointerTo(st).Implements(marshalerType) &&
		(st.Implements(textMarshalerType) || reflect.PointerTo(st).Implements(textMarshalerType)) {
		return nil, &InputError{Field: "type", Reason: t.String() + " marshals as the text of its MarshalText method: its fields are not JSON members"}
	}
	si := cachedStructInfo(st)
	names := make([]string, len(si.fields))
	for i := range si.fields {
		// Only the name: another goroutine may be filling in the encoders.
		names[i] = si.fields[i].name
	}
	return names, nil
}

var isZeroerType = reflect.TypeFor[interface{ IsZero() bool }]()

// newStructInfo mirrors encoding/json's typeFields.
func newStructInfo(t reflect.Type) *structInfo {
	current := []field{}
	next := []field{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []field

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}

		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := 0; i < f.typ.NumField(); i++ {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				index := make([]int, len(f.index)+1)
				copy(index, f.index)
				index[len(f.index)] = i

				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				quoted := false
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool,
						reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64,
						reflect.String:
						quoted = true
					}
					// Whether a Marshaler overrides it is decided per value,
					// as encoding/json does: see quotedFieldEncoder.
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					fld := field{
						name:      name,
						tagged:    tagged,
						index:     index,
						typ:       sf.Type, // the declared type; encoders follow pointers themselves
						omitEmpty: hasOption(opts, "omitempty"),
						omitZero:  hasOption(opts, "omitzero"),
						quoted:    quoted,
					}
					if fld.omitZero {
						fld.isZero = zeroFunc(sf.Type)
					}
					fields = append(fields, fld)
					if count[f.typ] > 1 {
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, field{name: ft.Name(), index: index, typ: ft})
				}
			}
		}
	}

	slices.SortFunc(fields, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return +1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		fi := fields[i]
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].name != fi.name {
				break
			}
		}
		if advance == 1 {
			out = append(out, fi)
			continue
		}
		// Dominance: the first is the shallowest (tagged first); two at the
		// same depth with the same taggedness annihilate each other.
		if len(fields[i].index) == len(fields[i+1].index) && fields[i].tagged == fields[i+1].tagged {
			continue
		}
		out = append(out, fi)
	}
	fields = out
	slices.SortFunc(fields, func(a, b field) int { return slices.Compare(a.index, b.index) })

	si := &structInfo{fields: fields, byName: make(map[string]int, len(fields))}
	for i := range fields {
		f := &fields[i]
		f.norm = normalize(f.name)
		f.keyBytes = appendKey(nil, f.norm)
		si.byName[f.name] = i
		si.sorted = append(si.sorted, i)
	}
	slices.SortFunc(si.sorted, func(a, b int) int { return strings.Compare(fields[a].norm, fields[b].norm) })
	for i := 1; i < len(si.sorted); i++ {
		if fields[si.sorted[i-1]].norm == fields[si.sorted[i]].norm {
			si.dupNFC = true
		}
	}
	return si
}

// zeroFunc returns the omitzero test encoding/json uses for a field type.
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() ||
				(v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil()) ||
				v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				v2 := reflect.New(v.Type()).Elem()
				v2.Set(v)
				v = v2
			}
			return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
		}
	}
	return nil
}

// omitted reports whether encoding/json would leave the field out.
func (f *field) omitted(v reflect.Value) bool {
	if f.omitEmpty && isEmptyValue(v) {
		return true
	}
	if f.omitZero {
		if f.isZero != nil {
			return f.isZero(v)
		}
		return v.IsZero()
	}
	return false
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// fieldValue walks a field's index sequence from the struct value v. It
// reports false when an embedded pointer on the way is nil: encoding/json
// leaves such a field out.
func fieldValue(v reflect.Value, index []int) (reflect.Value, bool) {
	for n, i := range index {
		if n > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == name {
			return true
		}
	}
	return false
}

// isValidTag is encoding/json's rule for a usable tag name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
