package redisstore

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// previousPack is the packer of releases up to 0.2.0, kept verbatim as the
// reference: it packs the fields of a record by name. What the store
// writes now must be byte for byte what it wrote, since those releases
// (and this one's Lua, pack_rec) read the same string.
func previousPack(f map[string]string) string {
	var b strings.Builder
	n := len(packVersion) + 1 + len(headerFields)
	for _, k := range headerFields {
		n += len(f[k])
	}
	for _, k := range varFields {
		n += len(f[k]) + 4
	}
	b.Grow(n)
	b.WriteString(packVersion)
	b.WriteByte('|')
	for _, k := range headerFields {
		b.WriteString(f[k])
		b.WriteByte('|')
	}
	for _, k := range varFields {
		v := f[k]
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// previousClaim is the map the previous release packed for a claim.
func previousClaim(token string, lease, exp, now stamp, retention time.Duration, holder, check, origin string) map[string]string {
	return map[string]string{
		"state": "pending", "token": token, "lease": lease.arg(), "exp": exp.arg(),
		"updated": now.arg(), "created": now.arg(), "ret": retentionArg(retention),
		"holder": holder, "check": check, "origin": origin,
	}
}

// randomText is a value of up to 40 runes drawn from the awkward ones: the
// layout's separators, digits (a value that looks like a length), NUL,
// multi-byte runes and invalid UTF-8; empty about one time in four.
func randomText(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	alphabet := []string{"|", ":", "2|", "0:", "9", "12:", "a", "Z", " ", "\x00", "\xff", "é", "🔑", "{", "}", `"`, "\n"}
	var b strings.Builder
	for range 1 + rng.IntN(40) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// randomInt is a positive int64 of any number of digits.
func randomInt(rng *rand.Rand) int64 {
	return rng.Int64N(int64(1) << uint(1+rng.IntN(62)))
}

// The claim's packer writes what the previous map packer wrote, for
// thousands of random claims, and unpack reads back every field.
func TestPackClaimIsThePreviousPacker(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 1))
	for i := range 20000 {
		token := strconv.FormatInt(randomInt(rng)+1, 10)
		lease, exp, now := stamp(randomInt(rng)), stamp(randomInt(rng)), stamp(randomInt(rng))
		retention := []time.Duration{0, time.Microsecond, time.Hour, time.Duration(randomInt(rng))}[rng.IntN(4)]
		holder, check, origin := randomText(rng), randomText(rng), randomText(rng)

		got := packClaim(token, lease, exp, now, retention.Microseconds(), holder, check, origin)
		want := previousPack(previousClaim(token, lease, exp, now, retention, holder, check, origin))
		require.Equal(t, want, got, "claim %d", i)
		m, err := unpack(got)
		require.NoError(t, err)
		require.Equal(t, holder, m["holder"])
		require.Equal(t, origin, m["origin"])
	}
}

// The writer, given every field of a record in the layout's order, writes
// what the previous map packer wrote, for random records whose every field
// may be empty or hold the separators.
func TestRecordWriterIsThePreviousPacker(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 2))
	for i := range 20000 {
		fields := map[string]string{}
		var w recordWriter
		w.begin(0) // The writer grows as it needs.
		for _, k := range headerFields {
			v := strings.ReplaceAll(randomText(rng), "|", "") // A fixed field never holds '|'.
			if rng.IntN(2) == 0 {
				n := randomInt(rng)
				v = strconv.FormatInt(n, 10)
				w.int(n)
			} else {
				w.text(v)
			}
			if v != "" {
				fields[k] = v
			}
		}
		for _, k := range varFields {
			v := randomText(rng)
			w.bytes(v)
			if v != "" {
				fields[k] = v
			}
		}
		got := w.String()
		require.Equal(t, previousPack(fields), got, "record %d", i)
		m, err := unpack(got)
		require.NoError(t, err)
		require.Equal(t, fields, m, "record %d reads back", i)
	}
}

// FuzzPackClaim compares the claim's packer with the previous map packer
// on any holder, check and origin.
func FuzzPackClaim(f *testing.F) {
	f.Add("holder", "", `{"workflow_id":"wf"}`, int64(1), int64(0))
	f.Add("", "|:|", "12:ab", int64(1<<62), int64(86_400_000_000))
	f.Add("🔑\x00\xff", "2|", "", int64(9), int64(-1))
	f.Fuzz(func(t *testing.T, holder, check, origin string, token, retUs int64) {
		tok := strconv.FormatInt(token, 10)
		now := stamp(1_767_225_600_000_000)
		retention := time.Duration(retUs) * time.Microsecond
		got := packClaim(tok, now+60_000_000, now+3_600_000_000, now, retention.Microseconds(), holder, check, origin)
		want := previousPack(previousClaim(tok, now+60_000_000, now+3_600_000_000, now, retention, holder, check, origin))
		if got != want {
			t.Fatalf("packClaim = %q, the previous packer wrote %q", got, want)
		}
	})
}

func BenchmarkPackClaim(b *testing.B) {
	now := stamp(1_767_225_600_000_000)
	origin := `{"workflow_id":"booking-42","run_id":"0195b7c2","activity_type":"Book"}`
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = packClaim("4611686018427387904", now+60_000_000, now+3_600_000_000, now, 0, "worker-1@host", "", origin)
		}
	})
	b.Run("previous", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = previousPack(previousClaim("4611686018427387904", now+60_000_000, now+3_600_000_000, now, 0, "worker-1@host", "", origin))
		}
	})
}
