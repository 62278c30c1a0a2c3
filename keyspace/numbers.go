package keyspace

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
)

// The encoding of numbers: every Go integer and float, *big.Int and
// json.Number (and a number in JSON) is written in the one form below. The
// rest of the encoder is in encode.go.
//
// Every number is written as tagNumber, a sign byte ('+' or '-'), the
// length-prefixed decimal digits of its significand with no leading or
// trailing zeros, and a zig-zag varint exponent: value = ±digits × 10^exp.
// Zero is '+', no digits, exponent 0.

func (e *encoder) writeZero() {
	e.buf = append(e.buf, tagNumber, '+', 0, 0)
}

func (e *encoder) writeInt(i int64) {
	if i < 0 {
		e.writeMagnitude(true, uint64(^i)+1)
		return
	}
	e.writeMagnitude(false, uint64(i))
}

func (e *encoder) writeUint(u uint64) { e.writeMagnitude(false, u) }

func (e *encoder) writeMagnitude(neg bool, u uint64) {
	if u == 0 {
		e.writeZero()
		return
	}
	var a [20]byte
	d := strconv.AppendUint(a[:0], u, 10)
	n := len(d)
	for d[n-1] == '0' {
		n--
	}
	e.writeDecimal(neg, d[:n], int64(len(d)-n))
}

// writeDecimal writes a normalised number: digits non-empty, without
// leading or trailing zeros.
func (e *encoder) writeDecimal(neg bool, digits []byte, exp int64) {
	sign := byte('+')
	if neg {
		sign = '-'
	}
	buf := append(e.buf, tagNumber, sign)
	buf = binary.AppendUvarint(buf, uint64(len(digits)))
	buf = append(buf, digits...)
	e.buf = binary.AppendVarint(buf, exp)
}

// writeFloat writes f, read as a float of bitSize bits: an integral value as
// its exact integer, a fractional one as the shortest decimal that reads
// back as the same float of that size.
func (e *encoder) writeFloat(f float64, bitSize int) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return unencodable("%v has no canonical form", f)
	}
	if f == 0 {
		e.writeZero()
		return nil
	}
	var a [32]byte
	if f == math.Trunc(f) {
		// Above 2^53 (2^24 for float32) neighbouring integers share a
		// float: the converter that decoded the number (Temporal's, for an
		// `any` or map[string]any parameter) may have merged two different
		// wire integers into this one. No key can tell them apart.
		if limit := exactFloatLimit(bitSize); f >= limit || f <= -limit {
			return unencodable("the integral float %v is 2^%d or more in magnitude: it may stand for several integers on the wire, so it has no exact key (declare the parameter as an integer type, json.Number or *big.Int)", f, exactFloatBits(bitSize))
		}
		if f > -(1<<63) && f < 1<<63 {
			e.writeInt(int64(f))
			return nil
		}
		// 'f' with precision 0 formats the exact value of an integral float.
		e.scratch = strconv.AppendFloat(e.scratch[:0], f, 'f', 0, 64)
		return writeNumberText(e, e.scratch, "float")
	}
	return writeNumberText(e, strconv.AppendFloat(a[:0], f, 'e', -1, bitSize), "float")
}

// exactFloatBits is the width of a float's significand: every integer of
// smaller magnitude than 2^bits is exact and has a float of its own.
func exactFloatBits(bitSize int) int {
	if bitSize == 32 {
		return 24
	}
	return 53
}

func exactFloatLimit(bitSize int) float64 { return math.Ldexp(1, exactFloatBits(bitSize)) }

func (e *encoder) writeBigInt(x *big.Int) error {
	if x.Sign() == 0 {
		e.writeZero()
		return nil
	}
	e.scratch = x.Append(e.scratch[:0], 10)
	return writeNumberText(e, e.scratch, "big.Int")
}

// maxExponent bounds the exponent of a number's text; a larger one is
// refused rather than computed with.
const maxExponent = 1 << 30

// writeNumberText writes a number given as JSON number text (with leading
// zeros allowed in the exponent, as strconv writes it). The text is parsed
// exactly: no precision is lost however many digits it has.
func writeNumberText[S string | []byte](e *encoder, s S, what string) error {
	neg, digits, exp, reason := parseNumber(s, e.digits[:0])
	e.digits = digits[:0]
	if reason != "" {
		return unencodable("%s %q is not a valid JSON number: %s", what, string(s), reason)
	}
	if len(digits) == 0 {
		e.writeZero()
		return nil
	}
	e.writeDecimal(neg, digits, exp)
	return nil
}

// writeJSONNumber writes a json.Number; like encoding/json, an empty one
// reads as 0.
func (e *encoder) writeJSONNumber(n json.Number) error {
	if n == "" {
		e.writeZero()
		return nil
	}
	return writeNumberText(e, string(n), "json.Number")
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseNumber parses JSON number text. It appends the significand's digits
// without leading or trailing zeros to dst (nothing for zero) and returns
// them with the exponent. reason is non-empty when s is malformed.
func parseNumber[S string | []byte](s S, dst []byte) (neg bool, digits []byte, exp int64, reason string) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	if i+1 < len(s) && s[i] == '0' && isDigit(s[i+1]) {
		return false, dst, 0, "leading zero"
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		if len(dst) > 0 || s[i] != '0' {
			dst = append(dst, s[i])
		}
		i++
	}
	if i == intStart {
		return false, dst, 0, "no digits before the fraction or exponent"
	}
	fracLen := int64(0)
	if i < len(s) && s[i] == '.' {
		i++
		fracStart := i
		for i < len(s) && isDigit(s[i]) {
			if len(dst) > 0 || s[i] != '0' {
				dst = append(dst, s[i])
			}
			fracLen++
			i++
		}
		if i == fracStart {
			return false, dst, 0, "no digits after the decimal point"
		}
	}
	var e10 int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		expStart := i
		for i < len(s) && isDigit(s[i]) {
			e10 = e10*10 + int64(s[i]-'0')
			if e10 > maxExponent {
				return false, dst, 0, "exponent out of range"
			}
			i++
		}
		if i == expStart {
			return false, dst, 0, "no digits in the exponent"
		}
		if eneg {
			e10 = -e10
		}
	}
	if i != len(s) {
		return false, dst, 0, "unexpected " + strconv.Quote(string(s[i:i+1]))
	}
	n := len(dst)
	for n > 0 && dst[n-1] == '0' {
		n--
	}
	if n == 0 {
		return false, dst[:0], 0, ""
	}
	return neg, dst[:n], e10 - fracLen + int64(len(dst)-n), ""
}
