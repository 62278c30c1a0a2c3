package keyspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// encodeForTest returns the bytes Derive hashes.
func encodeForTest(in Input) ([]byte, error) {
	e := getEncoder()
	defer putEncoder(e)
	if err := e.encodeInput(&in); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf), nil
}

// The exact bytes of v1, spelled out from the package documentation. If this
// test has to change, so does Version.
func TestEncodingBytes(t *testing.T) {
	t.Parallel()
	got, err := encodeForTest(Input{
		Tenant: "acme", Run: "r1", Activity: "book",
		Arguments: map[string]any{
			"n": []any{nil, false, true, -120, 0.25, 0, "é"},
			"m": map[string]any{"b": 1, "a": 2},
			"x": "ignored",
		},
		KeyArguments: []string{"n", "m"},
	})
	require.NoError(t, err)
	var want []byte
	want = append(want, byte(len(domain)))
	want = append(want, "github.com/tesserix/idempotency/keyspace v1"...)
	want = append(want, 4, 'a', 'c', 'm', 'e', 2, 'r', '1', 4, 'b', 'o', 'o', 'k')
	want = append(want, '{')
	want = append(want, 's', 1, 'm', '{', 's', 1, 'a', 'd', '+', 1, '2', 0, 's', 1, 'b', 'd', '+', 1, '1', 0, '}')
	want = append(want, 's', 1, 'n', '[', 'n', 'f', 't')
	want = append(want, 'd', '-', 2, '1', '2', 2) // -12 × 10^1, exponent 1 zig-zags to 2
	want = append(want, 'd', '+', 2, '2', '5', 3) // 25 × 10^-2, exponent -2 zig-zags to 3
	want = append(want, 'd', '+', 0, 0)           // zero
	want = append(want, 's', 2, 0xc3, 0xa9)       // "é", NFC
	want = append(want, ']', '}')
	assert.Equal(t, want, got, "got %q", got)
}

func TestParseNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		neg    bool
		digits string
		exp    int64
		reason string
	}{
		{in: "0"},
		{in: "-0"},
		{in: "0.000e-7"},
		{in: "1", digits: "1"},
		{in: "100", digits: "1", exp: 2},
		{in: "-100.50", neg: true, digits: "1005", exp: -1},
		{in: "0.0012", digits: "12", exp: -4},
		{in: "12.5e+03", digits: "125", exp: 2},
		{in: "1E-0400", digits: "1", exp: -400},
		{in: "123456789012345678901234567890", digits: "12345678901234567890123456789", exp: 1},
		{in: "", reason: "no digits"},
		{in: "-", reason: "no digits"},
		{in: "+1", reason: "no digits"},
		{in: ".5", reason: "no digits"},
		{in: "1.", reason: "after the decimal point"},
		{in: "1e", reason: "exponent"},
		{in: "1e+", reason: "exponent"},
		{in: "01", reason: "leading zero"},
		{in: "-00", reason: "leading zero"},
		{in: "1x", reason: "unexpected"},
		{in: "1 ", reason: "unexpected"},
		{in: "NaN", reason: "no digits"},
		{in: "1e1073741825", reason: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			neg, digits, exp, reason := parseNumber(tt.in, nil)
			if tt.reason != "" {
				assert.Contains(t, reason, tt.reason)
				return
			}
			assert.Empty(t, reason)
			assert.Equal(t, tt.neg, neg)
			assert.Equal(t, tt.digits, string(digits))
			assert.Equal(t, tt.exp, exp)
		})
	}
}

// checkCanonical parses an encoding as the package documentation defines
// it and checks every invariant: the whole input is one header and one
// object, numbers are normalised, strings are NFC UTF-8, object names are
// strictly ascending. That a parse is unique and consumes exactly the
// bytes is what makes the encoding injective.
func checkCanonical(b []byte) error {
	p := &parser{b: b}
	for _, what := range []string{"domain", "tenant", "run", "activity"} {
		s, err := p.field()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if what == "domain" && s != domain {
			return fmt.Errorf("domain %q", s)
		}
	}
	if len(p.b) == 0 || p.b[0] != tagObject {
		return errors.New("arguments are not an object")
	}
	if err := p.value(0); err != nil {
		return err
	}
	if len(p.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(p.b))
	}
	return nil
}

type parser struct{ b []byte }

func (p *parser) field() (string, error) {
	n, k := binary.Uvarint(p.b)
	if k <= 0 || uint64(len(p.b)-k) < n {
		return "", errors.New("bad length")
	}
	s := string(p.b[k : k+int(n)])
	p.b = p.b[k+int(n):]
	return s, nil
}

func (p *parser) str() (string, error) {
	s, err := p.field()
	if err != nil {
		return "", err
	}
	if !utf8.ValidString(s) || !norm.NFC.IsNormalString(s) {
		return "", fmt.Errorf("string %q is not NFC UTF-8", s)
	}
	return s, nil
}

func (p *parser) value(depth int) error {
	if len(p.b) == 0 {
		return errors.New("truncated")
	}
	if depth > maxDepth+2 {
		return errors.New("too deep")
	}
	tag := p.b[0]
	p.b = p.b[1:]
	switch tag {
	case tagNull, tagFalse, tagTrue:
		return nil
	case tagString:
		_, err := p.str()
		return err
	case tagNumber:
		if len(p.b) == 0 || (p.b[0] != '+' && p.b[0] != '-') {
			return errors.New("bad sign")
		}
		sign := p.b[0]
		p.b = p.b[1:]
		d, err := p.field()
		if err != nil {
			return err
		}
		e, k := binary.Varint(p.b)
		if k <= 0 {
			return errors.New("bad exponent")
		}
		p.b = p.b[k:]
		if d == "" {
			if sign != '+' || e != 0 {
				return errors.New("non-canonical zero")
			}
			return nil
		}
		if strings.Trim(d, "0123456789") != "" || d[0] == '0' || d[len(d)-1] == '0' {
			return fmt.Errorf("non-canonical digits %q", d)
		}
		return nil
	case tagList:
		for {
			if len(p.b) > 0 && p.b[0] == tagListEnd {
				p.b = p.b[1:]
				return nil
			}
			if err := p.value(depth + 1); err != nil {
				return err
			}
		}
	case tagObject:
		prev, first := "", true
		for {
			if len(p.b) == 0 {
				return errors.New("truncated object")
			}
			if p.b[0] == tagObjectEnd {
				p.b = p.b[1:]
				return nil
			}
			if p.b[0] != tagString {
				return errors.New("object name is not a string")
			}
			p.b = p.b[1:]
			name, err := p.str()
			if err != nil {
				return err
			}
			if !first && name <= prev {
				return fmt.Errorf("names %q, %q out of order", prev, name)
			}
			prev, first = name, false
			if err := p.value(depth + 1); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown tag %q", tag)
}

func TestEncodingIsCanonical(t *testing.T) {
	t.Parallel()
	values := []any{
		nil, "", "cafe\u0301", "a\xff", 0, -1, math.MaxInt64, uint64(math.MaxUint64), 1.5e-300, -1e-300, 0.1, float32(0.1),
		math.SmallestNonzeroFloat64, float64(1<<53 - 1), []any{}, map[string]any{},
		map[string]any{"z": []any{1, map[string]any{"cafe\u0301": true, "b": nil}}, "a": "x"},
		[]byte("bytes"), map[int]bool{10: true, 9: false, -1: true},
	}
	for i, v := range values {
		b, err := encodeForTest(Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"v": v, "w": 1}, KeyArguments: []string{"w", "v"}})
		require.NoError(t, err, "value %d", i)
		assert.NoError(t, checkCanonical(b), "value %d: %q", i, b)
	}
}

func TestEncoderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop encoders")
	}
	in := Input{Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments:    map[string]any{"flight": "BA117", "fare": 12950, "seats": []any{"12A", 1.5}, "ok": true},
		KeyArguments: []string{"flight", "fare", "seats", "ok"}}
	_, err := Derive(in) // warm the pool and caches
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() { _, _ = Derive(in) })
	// One allocation: the returned key string.
	assert.LessOrEqual(t, allocs, 1.0)
}
