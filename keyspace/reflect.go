package keyspace

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"sync"
	"time"
)

// encFunc writes the canonical encoding of v, whose type it was built for.
type encFunc func(e *encoder, v reflect.Value) error

var encoderCache sync.Map // map[reflect.Type]encFunc

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// typeEncoder returns the cached encoder of t, building it on first use. A
// recursive type gets a forwarding placeholder while its encoder is built,
// as in encoding/json.
func typeEncoder(t reflect.Type) encFunc {
	if f, ok := encoderCache.Load(t); ok {
		return f.(encFunc)
	}
	var (
		wg sync.WaitGroup
		f  encFunc
	)
	wg.Add(1)
	fi, loaded := encoderCache.LoadOrStore(t, encFunc(func(e *encoder, v reflect.Value) error {
		wg.Wait()
		return f(e, v)
	}))
	if loaded {
		return fi.(encFunc)
	}
	f = newTypeEncoder(t, true)
	wg.Done()
	encoderCache.Store(t, f)
	return f
}

// newTypeEncoder follows encoding/json's choice of encoder, with
// time.Time and big.Int checked before the Marshaler rules.
func newTypeEncoder(t reflect.Type, allowAddr bool) encFunc {
	switch {
	case t == timeType:
		return timeEncoder
	case t.Kind() == reflect.Pointer && t.Elem() == timeType:
		return ptrEncoder{elem: timeEncoder}.encode
	case t == bigIntType:
		return bigIntEncoder
	case t.Kind() == reflect.Pointer && t.Elem() == bigIntType:
		return ptrEncoder{elem: bigIntEncoder}.encode
	case t == jsonNumberType:
		return jsonNumberEncoder
	}
	if i, ptr, ok := embeddedTime(t); ok {
		return embeddedTimeEncoder{index: i, ptr: ptr}.encode
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(marshalerType) {
		return condAddrEncoder{canAddr: addrMarshalerEncoder, elseEnc: newTypeEncoder(t, false)}.encode
	}
	if t.Implements(marshalerType) {
		return marshalerEncoder
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(textMarshalerType) {
		return condAddrEncoder{canAddr: addrTextMarshalerEncoder, elseEnc: newTypeEncoder(t, false)}.encode
	}
	if t.Implements(textMarshalerType) {
		return textMarshalerEncoder
	}
	switch t.Kind() {
	case reflect.Bool:
		return boolEncoder
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intEncoder
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintEncoder
	case reflect.Float32:
		return float32Encoder
	case reflect.Float64:
		return float64Encoder
	case reflect.String:
		return stringEncoder
	case reflect.Interface:
		return interfaceEncoder
	case reflect.Struct:
		return newStructEncoder(t)
	case reflect.Map:
		return newMapEncoder(t)
	case reflect.Slice:
		return newSliceEncoder(t)
	case reflect.Array:
		return arrayEncoder{elem: typeEncoder(t.Elem())}.encode
	case reflect.Pointer:
		return ptrEncoder{elem: typeEncoder(t.Elem())}.encode
	default: // complex, chan, func, unsafe.Pointer
		return unsupportedEncoder(t)
	}
}

var embeddedTimeCache sync.Map // map[reflect.Type]embeddedTimeInfo

type embeddedTimeInfo struct {
	index int
	ptr   bool
	ok    bool
}

// embeddedTime reports whether t is a struct whose JSON form is the
// MarshalJSON it inherits from an embedded time.Time (or *time.Time): on
// the wire such a value is that time alone, its other fields dropped. It
// tells an inherited method from one t defines itself by calling it on a
// probe value.
func embeddedTime(t reflect.Type) (index int, ptr bool, ok bool) {
	if t.Kind() != reflect.Struct || !t.Implements(marshalerType) {
		return 0, false, false
	}
	if c, hit := embeddedTimeCache.Load(t); hit {
		info := c.(embeddedTimeInfo)
		return info.index, info.ptr, info.ok
	}
	info := embeddedTimeInfo{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.Anonymous || (f.Type != timeType && f.Type != reflect.PointerTo(timeType)) {
			continue
		}
		probe := time.Date(1999, 12, 31, 23, 59, 58, 987654321, time.FixedZone("probe", 5400))
		v := reflect.New(t).Elem()
		if f.Type == timeType {
			v.Field(i).Set(reflect.ValueOf(probe))
		} else {
			v.Field(i).Set(reflect.ValueOf(&probe))
		}
		want, _ := probe.MarshalJSON()
		m, _ := reflect.TypeAssert[json.Marshaler](v)
		got, err := safeMarshalJSON(m)
		if err == nil && bytes.Equal(got, want) {
			info = embeddedTimeInfo{index: i, ptr: f.Type != timeType, ok: true}
		}
		break
	}
	embeddedTimeCache.Store(t, info)
	return info.index, info.ptr, info.ok
}

func safeMarshalJSON(m json.Marshaler) (b []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("MarshalJSON panicked: %v", p)
		}
	}()
	return m.MarshalJSON()
}

// embeddedTimeEncoder writes a struct that marshals as its embedded time:
// the time, under the time rule (UTC, RFC 3339 with nanoseconds).
type embeddedTimeEncoder struct {
	index int
	ptr   bool
}

func (te embeddedTimeEncoder) encode(e *encoder, v reflect.Value) error {
	f := v.Field(te.index)
	if te.ptr {
		if f.IsNil() {
			return unencodable("the embedded *time.Time of %s is nil: encoding/json cannot marshal it", v.Type())
		}
		f = f.Elem()
	}
	t, _ := reflect.TypeAssert[time.Time](f)
	return e.writeTime(t)
}

func unsupportedEncoder(t reflect.Type) encFunc {
	return func(*encoder, reflect.Value) error {
		return unencodable("a value of type %s has no canonical form", t)
	}
}

func boolEncoder(e *encoder, v reflect.Value) error { e.writeBool(v.Bool()); return nil }
func intEncoder(e *encoder, v reflect.Value) error  { e.writeInt(v.Int()); return nil }
func uintEncoder(e *encoder, v reflect.Value) error { e.writeUint(v.Uint()); return nil }
func float32Encoder(e *encoder, v reflect.Value) error {
	return e.writeFloat(v.Float(), 32)
}
func float64Encoder(e *encoder, v reflect.Value) error {
	return e.writeFloat(v.Float(), 64)
}
func stringEncoder(e *encoder, v reflect.Value) error { e.writeString(v.String()); return nil }

func jsonNumberEncoder(e *encoder, v reflect.Value) error {
	return e.writeJSONNumber(json.Number(v.String()))
}

func timeEncoder(e *encoder, v reflect.Value) error {
	t, _ := reflect.TypeAssert[time.Time](v)
	return e.writeTime(t)
}

func bigIntEncoder(e *encoder, v reflect.Value) error {
	if v.CanAddr() {
		x, _ := reflect.TypeAssert[*big.Int](v.Addr())
		return e.writeBigInt(x)
	}
	x, _ := reflect.TypeAssert[big.Int](v)
	return e.writeBigInt(&x)
}

func interfaceEncoder(e *encoder, v reflect.Value) error {
	if v.IsNil() {
		e.writeNull()
		return nil
	}
	// Every nesting that involves no pointer, map or slice (which enter
	// counts) passes through an interface: a value type cannot contain
	// itself otherwise. Counting here bounds the depth on every path.
	e.depth++
	if e.depth > maxDepth {
		return unencodable("values nested deeper than %d levels have no canonical form", maxDepth)
	}
	err := e.encodeAny(v.Interface())
	e.depth--
	return err
}

func marshalerEncoder(e *encoder, v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		e.writeNull()
		return nil
	}
	m, ok := reflect.TypeAssert[json.Marshaler](v)
	if !ok { // a nil interface
		e.writeNull()
		return nil
	}
	return e.marshalJSON(m, v.Type())
}

func addrMarshalerEncoder(e *encoder, v reflect.Value) error {
	m, _ := reflect.TypeAssert[json.Marshaler](v.Addr())
	return e.marshalJSON(m, v.Type())
}

func (e *encoder) marshalJSON(m json.Marshaler, t reflect.Type) error {
	b, err := m.MarshalJSON()
	if err != nil {
		return unencodable("MarshalJSON of %s failed: %v", t, err)
	}
	return e.encodeJSON(b, t)
}

func textMarshalerEncoder(e *encoder, v reflect.Value) error {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		e.writeNull()
		return nil
	}
	m, ok := reflect.TypeAssert[encoding.TextMarshaler](v)
	if !ok {
		e.writeNull()
		return nil
	}
	return e.marshalText(m, v.Type())
}

func addrTextMarshalerEncoder(e *encoder, v reflect.Value) error {
	m, _ := reflect.TypeAssert[encoding.TextMarshaler](v.Addr())
	return e.marshalText(m, v.Type())
}

func (e *encoder) marshalText(m encoding.TextMarshaler, t reflect.Type) error {
	b, err := m.MarshalText()
	if err != nil {
		return unencodable("MarshalText of %s failed: %v", t, err)
	}
	e.writeString(string(b))
	return nil
}

// condAddrEncoder uses a pointer-receiver method when the value is
// addressable, as encoding/json does.
type condAddrEncoder struct{ canAddr, elseEnc encFunc }

func (ce condAddrEncoder) encode(e *encoder, v reflect.Value) error {
	if v.CanAddr() {
		return ce.canAddr(e, v)
	}
	return ce.elseEnc(e, v)
}

type ptrEncoder struct{ elem encFunc }

func (pe ptrEncoder) encode(e *encoder, v reflect.Value) error {
	if v.IsNil() {
		e.writeNull()
		return nil
	}
	if err := e.enter(v); err != nil {
		return err
	}
	if err := pe.elem(e, v.Elem()); err != nil {
		return err
	}
	e.leave(v)
	return nil
}

type arrayEncoder struct{ elem encFunc }

func (ae arrayEncoder) encode(e *encoder, v reflect.Value) error {
	e.buf = append(e.buf, tagList)
	n := v.Len()
	for i := 0; i < n; i++ {
		if err := ae.elem(e, v.Index(i)); err != nil {
			return withSeg(err, strconv.Itoa(i))
		}
	}
	e.buf = append(e.buf, tagListEnd)
	return nil
}

func newSliceEncoder(t reflect.Type) encFunc {
	if t.Elem().Kind() == reflect.Uint8 {
		p := reflect.PointerTo(t.Elem())
		if !p.Implements(marshalerType) && !p.Implements(textMarshalerType) {
			return byteSliceEncoder
		}
	}
	ae := arrayEncoder{elem: typeEncoder(t.Elem())}
	return func(e *encoder, v reflect.Value) error {
		if v.IsNil() {
			e.writeNull()
			return nil
		}
		if err := e.enter(v); err != nil {
			return err
		}
		if err := ae.encode(e, v); err != nil {
			return err
		}
		e.leave(v)
		return nil
	}
}

func byteSliceEncoder(e *encoder, v reflect.Value) error {
	if v.IsNil() {
		e.writeNull()
		return nil
	}
	e.writeBytes(v.Bytes())
	return nil
}

func newMapEncoder(t reflect.Type) encFunc {
	if t == mapAnyType {
		return func(e *encoder, v reflect.Value) error {
			m, _ := reflect.TypeAssert[map[string]any](v)
			return e.encodeMapAny(m)
		}
	}
	kt := t.Key()
	switch kt.Kind() {
	case reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		if !kt.Implements(textMarshalerType) {
			return func(*encoder, reflect.Value) error {
				return unencodable("a map with keys of type %s has no canonical form", kt)
			}
		}
	}
	me := mapEncoder{elem: typeEncoder(t.Elem())}
	return me.encode
}

type mapEncoder struct{ elem encFunc }

func (me mapEncoder) encode(e *encoder, v reflect.Value) error {
	if v.IsNil() {
		e.writeNull()
		return nil
	}
	if err := e.enter(v); err != nil {
		return err
	}
	start := len(e.refKV)
	iter := v.MapRange()
	for iter.Next() {
		k, err := resolveKeyName(iter.Key())
		if err != nil {
			return err
		}
		e.refKV = append(e.refKV, refKV{norm: normalize(k), key: k, val: iter.Value()})
	}
	end := len(e.refKV)
	if err := sortMembers(e.refKV[start:end]); err != nil {
		return err
	}
	e.buf = append(e.buf, tagObject)
	for i := start; i < end; i++ {
		kv := e.refKV[i]
		e.buf = appendKey(e.buf, kv.norm)
		if err := me.elem(e, kv.val); err != nil {
			return withSeg(err, pointerToken(kv.key))
		}
	}
	e.buf = append(e.buf, tagObjectEnd)
	clear(e.refKV[start:end])
	e.refKV = e.refKV[:start]
	e.leave(v)
	return nil
}

// resolveKeyName turns a map key into its JSON name as encoding/json does.
func resolveKeyName(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if tm, ok := reflect.TypeAssert[encoding.TextMarshaler](k); ok {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", nil
		}
		b, err := tm.MarshalText()
		if err != nil {
			return "", unencodable("MarshalText of map key type %s failed: %v", k.Type(), err)
		}
		return string(b), nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	default:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
}

func newStructEncoder(t reflect.Type) encFunc {
	si := cachedStructInfo(t)
	si.encoders()
	return func(e *encoder, v reflect.Value) error {
		e.buf = append(e.buf, tagObject)
		last := ""
		for _, i := range si.sorted {
			f := &si.fields[i]
			fv, ok := fieldValue(v, f.index)
			if !ok || f.omitted(fv) {
				continue
			}
			if si.dupNFC {
				if f.norm == last {
					return unencodable("two fields of %s are named %q after NFC normalisation, so it has no canonical form", t, f.norm)
				}
				last = f.norm
			}
			e.buf = append(e.buf, f.keyBytes...)
			if err := f.enc(e, fv); err != nil {
				return withSeg(err, pointerToken(f.name))
			}
		}
		e.buf = append(e.buf, tagObjectEnd)
		return nil
	}
}

// quotedFieldEncoder returns the encoder of a field of type t with the
// ",string" option. encoding/json ignores the option when it calls the
// value's MarshalJSON or MarshalText, and a pointer-receiver method is
// called only when the value is addressable: so is it here.
func quotedFieldEncoder(t reflect.Type) encFunc {
	own := func(t reflect.Type) bool { return t.Implements(marshalerType) || t.Implements(textMarshalerType) }
	switch {
	case t == timeType || t == bigIntType || own(t):
		return typeEncoder(t)
	case t.Kind() == reflect.Pointer && own(t.Elem()):
		return typeEncoder(t)
	case t.Kind() != reflect.Pointer && own(reflect.PointerTo(t)):
		return condAddrEncoder{canAddr: typeEncoder(t), elseEnc: quotedEncoder}.encode
	}
	return quotedEncoder
}

// quotedEncoder writes a field with the ",string" option: the JSON text of
// its value, as a string, which is what encoding/json sends.
func quotedEncoder(e *encoder, v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			e.writeNull()
			return nil
		}
		v = v.Elem()
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return unencodable("encoding a \",string\" field: %v", err)
	}
	e.writeString(string(b))
	return nil
}
