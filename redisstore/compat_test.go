package redisstore_test

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/compat"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store/storetest"
)

// The compatibility fixtures of the Redis store (see internal/compat): each
// set under testdata/compat holds
//
//	keys.json     every key the store wrote for the records, raw: record
//	              hashes (every field), the per-tenant index sets and age
//	              sorted sets, with their time to live
//	records.json  the same records as that release's Lookup read them
//
// with the store's prefix written "{{prefix}}".

const (
	compatKeysJSON = "keys.json"
	prefixMarker   = "{{prefix}}"
)

// rawKey is one Redis key as a set keeps it.
type rawKey struct {
	Key  string `json:"key"`
	Type string `json:"type"`
	// PTTL is the key's time to live in milliseconds when it was read;
	// zero when it has none.
	PTTL int64 `json:"pttl_ms"`
	// Value of a string (a packed record): UTF-8, or else in base64.
	Value       string `json:"value,omitempty"`
	ValueBase64 string `json:"value_base64,omitempty"`
	// Fields of a hash: the UTF-8 values, and the others in base64.
	Fields       map[string]string `json:"fields,omitempty"`
	FieldsBase64 map[string]string `json:"fields_base64,omitempty"`
	// Members of a set, sorted.
	Members []string `json:"members,omitempty"`
	// Scores of a sorted set's members, in its order; scores as decimal
	// text.
	Scores []rawScore `json:"scores,omitempty"`
}

type rawScore struct {
	Member string `json:"member"`
	Score  string `json:"score"`
}

type rawKeys struct {
	Keys []rawKey `json:"keys"`
}

// dumpKeys reads every key under prefix, raw.
func dumpKeys(t testing.TB, client redis.UniversalClient, prefix string) rawKeys {
	t.Helper()
	ctx := context.Background()
	var names []string
	iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		names = append(names, iter.Val())
	}
	require.NoError(t, iter.Err())
	slices.Sort(names)
	var out rawKeys
	for _, n := range names {
		k := rawKey{Key: prefixMarker + strings.TrimPrefix(n, prefix)}
		typ, err := client.Type(ctx, n).Result()
		require.NoError(t, err)
		k.Type = typ
		pttl, err := client.PTTL(ctx, n).Result()
		require.NoError(t, err)
		if pttl > 0 {
			k.PTTL = pttl.Milliseconds()
		}
		switch typ {
		case "string":
			v, err := client.Get(ctx, n).Result()
			require.NoError(t, err)
			if utf8.ValidString(v) {
				k.Value = v
			} else {
				k.ValueBase64 = base64.StdEncoding.EncodeToString([]byte(v))
			}
		case "hash":
			m, err := client.HGetAll(ctx, n).Result()
			require.NoError(t, err)
			for f, v := range m {
				if utf8.ValidString(v) {
					if k.Fields == nil {
						k.Fields = map[string]string{}
					}
					k.Fields[f] = v
				} else {
					if k.FieldsBase64 == nil {
						k.FieldsBase64 = map[string]string{}
					}
					k.FieldsBase64[f] = base64.StdEncoding.EncodeToString([]byte(v))
				}
			}
		case "set":
			m, err := client.SMembers(ctx, n).Result()
			require.NoError(t, err)
			slices.Sort(m)
			k.Members = m
		case "zset":
			zs, err := client.ZRangeWithScores(ctx, n, 0, -1).Result()
			require.NoError(t, err)
			for _, z := range zs {
				k.Scores = append(k.Scores, rawScore{Member: z.Member.(string), Score: strconv.FormatFloat(z.Score, 'f', -1, 64)})
			}
		default:
			t.Fatalf("key %s is a %s: the fixtures know strings, hashes, sets and sorted sets", n, typ)
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// loadKeys writes the set's keys under prefix, as they were.
func loadKeys(t testing.TB, client redis.UniversalClient, prefix string, keys rawKeys) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys.Keys {
		require.True(t, strings.HasPrefix(k.Key, prefixMarker), "key %s", k.Key)
		n := prefix + strings.TrimPrefix(k.Key, prefixMarker)
		switch k.Type {
		case "string":
			v := k.Value
			if k.ValueBase64 != "" {
				b, err := base64.StdEncoding.DecodeString(k.ValueBase64)
				require.NoError(t, err, "%s value", k.Key)
				v = string(b)
			}
			require.NoError(t, client.Set(ctx, n, v, 0).Err())
		case "hash":
			var args []any
			for f, v := range k.Fields {
				args = append(args, f, v)
			}
			for f, v := range k.FieldsBase64 {
				b, err := base64.StdEncoding.DecodeString(v)
				require.NoError(t, err, "%s field %s", k.Key, f)
				args = append(args, f, string(b))
			}
			require.NoError(t, client.HSet(ctx, n, args...).Err())
		case "set":
			require.NoError(t, client.SAdd(ctx, n, toAny(k.Members)...).Err())
		case "zset":
			zs := make([]redis.Z, len(k.Scores))
			for i, s := range k.Scores {
				f, err := strconv.ParseFloat(s.Score, 64)
				require.NoError(t, err)
				zs[i] = redis.Z{Member: s.Member, Score: f}
			}
			require.NoError(t, client.ZAdd(ctx, n, zs...).Err())
		default:
			t.Fatalf("key %s: unknown type %s", k.Key, k.Type)
		}
		if k.PTTL > 0 {
			require.NoError(t, client.PExpire(ctx, n, msDuration(k.PTTL)).Err())
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// compatStore opens a store under a fresh prefix whose clock is clock.
func compatStore(t testing.TB, clock *storetest.Clock) (*redisstore.Store, redis.UniversalClient, string) {
	t.Helper()
	client, prefix := redisenv.Redis(t)
	st, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st, client, prefix
}

// writeCompat writes the set's records with the current code under a fresh
// prefix and reads back what it wrote.
func writeCompat(t testing.TB) (rawKeys, compat.Records) {
	t.Helper()
	clock := storetest.NewClock(compat.Epoch)
	st, client, prefix := compatStore(t, clock)
	recs := compat.WriteRecords(t, st, clock)
	return dumpKeys(t, client, prefix), recs
}

// TestCompatWrite writes a new fixture set, with IDEMPOTENCY_WRITE_COMPAT
// naming it; see internal/compat.
func TestCompatWrite(t *testing.T) {
	set := compat.ToWrite(t)
	keys, recs := writeCompat(t)
	set.WriteJSON(t, compatKeysJSON, keys)
	set.WriteJSON(t, compat.RecordsFile, recs)
	set.WriteREADME(t, "redisstore", `every Redis key the store wrote for the records
internal/compat.WriteRecords writes (keys.json: the records, each one string in
the packed layout of release 3 (redisstore/record.go; values that are not UTF-8
in base64), and the per-tenant age sorted sets, each with its time to live when
it was read), with records.json, the same records as Lookup read them.
"{{prefix}}" stands for the store's prefix. The sets before release 3 hold record
hashes and index sets: the store still reads them (and Migrate converts them).`)
}

func readSet(t testing.TB, set compat.Set) (rawKeys, compat.Records) {
	t.Helper()
	var keys rawKeys
	set.ReadJSON(t, compatKeysJSON, &keys)
	var recs compat.Records
	set.ReadJSON(t, compat.RecordsFile, &recs)
	return keys, recs
}

// Every committed set loads under a fresh prefix, key for key, and the
// current code reads every record exactly, settles them as the contract
// says, and sweeps and forgets them (through the age index, and the index
// sets of the sets before r3). See internal/compat.
func TestCompatRead(t *testing.T) {
	t.Parallel()
	for _, set := range compat.Sets(t) {
		t.Run(set.Name, func(t *testing.T) {
			t.Parallel()
			keys, recs := readSet(t, set)
			require.NotEmpty(t, recs.Records)
			for _, part := range []string{"reads and writes", "retention"} {
				t.Run(part, func(t *testing.T) {
					t.Parallel()
					clock := storetest.NewClock(recs.Now)
					st, client, prefix := compatStore(t, clock)
					loadKeys(t, client, prefix, keys)
					if part == "retention" {
						compat.CheckRetention(t, st, clock, recs)
						return
					}
					compat.CheckReads(t, st, clock, recs)
					compat.CheckWrites(t, st, clock, recs)
				})
			}
		})
	}
}

// The current code writes what the newest set holds: the same keys, the
// same fields and members, fencing tokens aside (they are random) and
// times to live compared only as present or absent. A change of the layout
// fails here until a release adds a set of its own (make compat-fixtures),
// whose notes say how the earlier sets are still read.
func TestCompatWritesNewest(t *testing.T) {
	t.Parallel()
	newest := compat.Newest(compat.Sets(t))
	keys, recs := readSet(t, newest)
	gotKeys, gotRecs := writeCompat(t)
	assert.Equal(t, string(compat.MarshalIndent(t, normalizeKeys(keys, recs))), string(compat.MarshalIndent(t, normalizeKeys(gotKeys, gotRecs))),
		"the keys differ from those of %s", newest.Name)
	assert.Equal(t, len(recs.Records), len(gotRecs.Records))
}

// normalizeKeys replaces the tokens of recs in keys' hash fields and packed
// values by placeholders naming their records, and every time to live by 1.
func normalizeKeys(keys rawKeys, recs compat.Records) rawKeys {
	names := map[string]string{}
	for tok, name := range recs.Tokens() {
		names[strconv.FormatInt(tok, 10)] = name
	}
	out := rawKeys{}
	for _, k := range keys.Keys {
		if k.PTTL > 0 {
			k.PTTL = 1
		}
		if k.Value != "" {
			for tok, name := range names {
				k.Value = strings.ReplaceAll(k.Value, "|"+tok+"|", "|"+name+"|")
			}
		}
		if k.ValueBase64 != "" {
			b, _ := base64.StdEncoding.DecodeString(k.ValueBase64)
			v := string(b)
			for tok, name := range names {
				v = strings.ReplaceAll(v, "|"+tok+"|", "|"+name+"|")
			}
			k.ValueBase64 = base64.StdEncoding.EncodeToString([]byte(v))
		}
		if k.Fields != nil {
			f := make(map[string]string, len(k.Fields))
			for n, v := range k.Fields {
				if n == "token" && names[v] != "" {
					v = names[v]
				}
				f[n] = v
			}
			k.Fields = f
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
