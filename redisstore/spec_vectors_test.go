package redisstore_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/compat"
	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store/storetest"
)

// The specification's Redis records (spec/vectors/records-redis.json, see
// spec/SPEC.md): the scenarios of internal/compat run through the real
// store on the real Redis, and each key's Redis keys read back: the record
// key's packed string (its bytes in hex, and as text when they are UTF-8),
// and the member and score of the key in the tenant's age index. The
// prefix is written "{{prefix}}", tokens as their placeholders (the
// packed layout's fixed fields are not length-prefixed, so the masked text
// still parses). Times to live are left out: Redis counts them down on
// its own clock. -update writes the file (with the package's -update flag,
// spec_lua_internal_test.go):
//
//	go test ./redisstore/ -run SpecVectors -update

// specRedisRecord is a key's record as Redis holds it.
type specRedisRecord struct {
	RecordKey string `json:"record_key"`
	Type      string `json:"type"`
	PackedHex string `json:"packed_hex"`
	Packed    string `json:"packed,omitempty"`
	AgeKey    string `json:"age_key"`
	// AgeScore is the key's score in the age index (decimal text), or
	// null when the index does not list it.
	AgeScore *string `json:"age_score"`
}

func specRedis(t testing.TB, client redis.UniversalClient, prefix, tenant, key string, m *compat.SpecMasker) any {
	t.Helper()
	ctx := context.Background()
	base := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "}"
	recKey, ageKey := base+":r:"+key, base+":age"
	typ, err := client.Type(ctx, recKey).Result()
	require.NoError(t, err)
	if typ == "none" {
		return nil
	}
	require.Equal(t, "string", typ, "a record is one packed string")
	v, err := client.Get(ctx, recKey).Result()
	require.NoError(t, err)
	v = m.Mask(v)
	out := specRedisRecord{RecordKey: "{{prefix}}" + strings.TrimPrefix(recKey, prefix), Type: typ,
		PackedHex: hex.EncodeToString([]byte(v)), AgeKey: "{{prefix}}" + strings.TrimPrefix(ageKey, prefix)}
	if utf8.ValidString(v) {
		out.Packed = v
	}
	score, err := client.ZScore(ctx, ageKey, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		require.NoError(t, err)
	default:
		s := strconv.FormatFloat(score, 'f', -1, 64)
		out.AgeScore = &s
	}
	return out
}

func TestSpecVectorsRecords(t *testing.T) {
	client, prefix := redisenv.Redis(t)
	clock := storetest.NewClock(compat.Epoch)
	st, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Clock: clock, TTL: compat.SpecTTL})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	scenarios := compat.SpecScenarios(t, st, clock, func(tenant, key string, m *compat.SpecMasker) any {
		return specRedis(t, client, prefix, tenant, key, m)
	})
	compat.CheckSpecFile(t, "../spec/vectors/records-redis.json", "redisstore_test.TestSpecVectorsRecords", scenarios, specUpdate())
}

// specUpdate reports the -update flag, which the package's internal test
// (spec_lua_internal_test.go) registers in the same test binary.
func specUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}
