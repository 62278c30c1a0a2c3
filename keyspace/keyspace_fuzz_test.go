package keyspace

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// FuzzDerive checks properties of Derive on arbitrary input: it never
// panics; its keys always parse; the bytes it hashes are always canonical;
// spellings of one payload (NFC and NFD strings and keys, integers as
// json.Number and big.Int, floats as their exact text, JSON decoded with and
// without UseNumber where the floats are exact, JSON re-marshalled in
// another key order) derive one key; and moving a byte between tenant and
// run changes the key.
func FuzzDerive(f *testing.F) {
	f.Add("acme", "run_1", "book", "café", int64(9007199254740993), 0.1, `{"b":[1,2.5,"x"],"a":{"z":null,"y":true}}`)
	f.Add("a", "bc", "x", "e\u0301", int64(-1), 1e300, `{"n":1e400}`)
	f.Fuzz(func(t *testing.T, tenant, run, activity, s string, n int64, fl float64, jsonText string) {
		derive := func(args map[string]any, keys ...string) (Key, error) {
			return Derive(Input{Tenant: tenant, Run: run, Activity: activity, Arguments: args, KeyArguments: keys})
		}
		must := func(args map[string]any, keys ...string) Key {
			t.Helper()
			k, err := derive(args, keys...)
			if err != nil {
				t.Fatalf("Derive(%#v): %v", args, err)
			}
			if _, err := ParseKey(k.String()); err != nil {
				t.Fatalf("Derive output %q does not parse: %v", k, err)
			}
			b, err := encodeForTest(Input{Tenant: tenant, Run: run, Activity: activity, Arguments: args, KeyArguments: keys})
			if err != nil {
				t.Fatal(err)
			}
			if err := checkCanonical(b); err != nil {
				t.Fatalf("encoding of %#v is not canonical: %v\n%q", args, err, b)
			}
			return k
		}
		if tenant == "" || run == "" || activity == "" {
			if _, err := derive(nil); err == nil {
				t.Fatal("empty identifier accepted")
			}
			return
		}

		// Strings and keys: NFC and NFD spell one payload.
		nfc, nfd := norm.NFC.String(s), norm.NFD.String(s)
		if a, b := must(map[string]any{"s": nfc}, "s"), must(map[string]any{"s": nfd}, "s"); a != b {
			t.Fatalf("NFC %q and NFD %q differ", nfc, nfd)
		}
		ka, errA := derive(map[string]any{"m": map[string]any{nfc: s}}, "m")
		kb, errB := derive(map[string]any{"m": map[string]any{nfd: s}}, "m")
		if errA != nil || errB != nil || ka != kb {
			t.Fatalf("map keys NFC %q and NFD %q: %v %v %v %v", nfc, nfd, ka, kb, errA, errB)
		}
		if a, b := must(map[string]any{"s": s}, "s"), must(map[string]any{"s": []byte(s)}, "s"); s != "" && a == b {
			// A string and its bytes (base64) are only equal if s is its own base64.
			if s != base64.StdEncoding.EncodeToString([]byte(s)) {
				t.Fatalf("string %q and its bytes collide", s)
			}
		}

		// Integers: every spelling of n agrees; n and n+1 differ.
		ki := must(map[string]any{"n": n}, "n")
		for _, v := range []any{json.Number(strconv.FormatInt(n, 10)), big.NewInt(n), json.Number(strconv.FormatInt(n, 10) + ".000")} {
			if k := must(map[string]any{"n": v}, "n"); k != ki {
				t.Fatalf("%d and %#v differ", n, v)
			}
		}
		if n != math.MaxInt64 {
			if k := must(map[string]any{"n": n + 1}, "n"); k == ki {
				t.Fatalf("%d and %d collide", n, n+1)
			}
		}
		if k := must(map[string]any{"n": strconv.FormatInt(n, 10)}, "n"); k == ki {
			t.Fatalf("%d and its string collide", n)
		}

		// Floats: refused when not finite; otherwise the float and its
		// exact text agree.
		if math.IsNaN(fl) || math.IsInf(fl, 0) || (fl == math.Trunc(fl) && math.Abs(fl) >= 1<<53) {
			// Not finite, or an integral float that may stand for several
			// wire integers.
			if _, err := derive(map[string]any{"f": fl}, "f"); err == nil {
				t.Fatalf("%v accepted", fl)
			}
		} else {
			text := strconv.FormatFloat(fl, 'f', -1, 64)
			if fl == math.Trunc(fl) {
				text = strconv.FormatFloat(fl, 'f', 0, 64) // the exact integer
			}
			if a, b := must(map[string]any{"f": fl}, "f"), must(map[string]any{"f": json.Number(text)}, "f"); a != b {
				t.Fatalf("%v and json.Number(%q) differ", fl, text)
			}
		}

		// JSON text: decoded with UseNumber, decoded to float64 where that is
		// exact, re-marshalled (encoding/json sorts keys) and passed raw all
		// spell one payload.
		var withNumbers, withFloats any
		dec := json.NewDecoder(bytes.NewReader([]byte(jsonText)))
		dec.UseNumber()
		if dec.Decode(&withNumbers) != nil || dec.More() {
			return
		}
		if err := json.Unmarshal([]byte(jsonText), &withFloats); err != nil {
			return // a number out of float64's range
		}
		if checkDuplicateMembers([]byte(jsonText)) != nil {
			// Decoding kept one of two values; the text itself is refused.
			if _, err := derive(map[string]any{"j": json.RawMessage(jsonText)}, "j"); err == nil {
				t.Fatalf("raw JSON with a duplicate member accepted: %s", jsonText)
			}
			return
		}
		kn, err := derive(map[string]any{"j": withNumbers}, "j")
		if err != nil {
			if _, err2 := derive(map[string]any{"j": json.RawMessage(jsonText)}, "j"); err2 == nil {
				t.Fatalf("decoded JSON refused (%v) but raw accepted", err)
			}
			return
		}
		if kr := must(map[string]any{"j": json.RawMessage(jsonText)}, "j"); kr != kn {
			t.Fatalf("raw JSON and decoded JSON differ: %s", jsonText)
		}
		kf, err := derive(map[string]any{"j": withFloats}, "j")
		if err != nil {
			// float64 decoding made an integral float of 2^53 or more,
			// which may stand for several wire integers.
			if numbersExact(withNumbers) {
				t.Fatalf("float64 decoding refused (%v) though every number is exact: %s", err, jsonText)
			}
			return
		}
		if numbersExact(withNumbers) && kf != kn {
			t.Fatalf("UseNumber and float64 decodings differ though every number is exact: %s", jsonText)
		}
		again, err := json.Marshal(withFloats)
		if err != nil {
			t.Fatal(err)
		}
		var reparsed any
		if err := json.Unmarshal(again, &reparsed); err != nil {
			t.Fatal(err)
		}
		if k := must(map[string]any{"j": reparsed}, "j"); k != kf {
			t.Fatalf("re-marshalled JSON differs: %s vs %s", jsonText, again)
		}

		// Domain separation: moving the boundary between tenant and run.
		if len(run) > 1 {
			k1 := must(nil)
			k2, err := Derive(Input{Tenant: tenant + run[:1], Run: run[1:], Activity: activity})
			if err != nil {
				t.Fatal(err)
			}
			if k1 == k2 {
				t.Fatalf("tenant %q run %q collides with tenant %q run %q", tenant, run, tenant+run[:1], run[1:])
			}
		}
	})
}

// numbersExact reports whether every number in a UseNumber decoding reads
// back exactly as the float64 encoding/json would decode it to, in the
// canonical encoding.
func numbersExact(x any) bool {
	switch v := x.(type) {
	case json.Number:
		fl, err := v.Float64()
		if err != nil {
			return false
		}
		a, errA := encodeForTest(Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"v": v}, KeyArguments: []string{"v"}})
		b, errB := encodeForTest(Input{Tenant: "t", Run: "r", Activity: "a", Arguments: map[string]any{"v": fl}, KeyArguments: []string{"v"}})
		return errA == nil && errB == nil && bytes.Equal(a, b)
	case []any:
		for _, e := range v {
			if !numbersExact(e) {
				return false
			}
		}
	case map[string]any:
		for _, e := range v {
			if !numbersExact(e) {
				return false
			}
		}
	}
	return true
}
