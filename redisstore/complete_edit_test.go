package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tesserix/idempotency/internal/testenv/redisenv"
	"github.com/tesserix/idempotency/store"
)

// wholeCompleteScript is the completion read whole (completeWhole) as a
// script of its own: the reference completeScript's in-place edit is held
// to.
var wholeCompleteScript = redis.NewScript(argvLua(completeArgs{}.params()) + ownWindow + recordLua + fencePrelude + completeWhole)

// completeScript edits a packed record in place: for thousands of random
// records (every field drawn from the layout's awkward values, live or
// expired, the token right or wrong, keeping a retention of their own or
// not, watched or not) it answers what the completion read whole answers
// and writes, byte for byte, the string it writes, with the same time to
// live. A record hash of the previous layout it completes whole.
func TestCompleteEditWritesWhatCompleteWrites(t *testing.T) {
	t.Parallel()
	client, prefix := redisenv.Redis(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 33))
	now := stamp(time.Now().UnixMicro())
	field := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return strconv.FormatInt(randomInt(rng), 10)
	}
	ret := func() string {
		switch rng.IntN(3) {
		case 0:
			return ""
		case 1:
			return strconv.FormatInt(rng.Int64N(int64(48*time.Hour/time.Microsecond)), 10)
		default:
			return "0"
		}
	}
	applied, notHolder := 0, 0
	for i := range 2000 {
		token := strconv.FormatInt(randomInt(rng), 10)
		exp := now.add(time.Duration(rng.Int64N(int64(time.Hour))) - 20*time.Minute)
		state := "pending"
		if rng.IntN(8) == 0 {
			state = []string{"completed", "indeterminate"}[rng.IntN(2)]
		}
		w := ""
		if rng.IntN(2) == 0 {
			w = "1"
		}
		rec := previousPack(map[string]string{
			"state": state, "token": token, "lease": field(), "exp": exp.arg(), "updated": field(),
			"created": field(), "ret": ret(), "sup": field(), "w": w,
			"holder": randomText(rng), "check": randomText(rng), "origin": randomText(rng),
			"outcome": randomText(rng), "reason": randomText(rng), "resolution": randomText(rng),
		})
		fenceToken := token
		if rng.IntN(6) == 0 {
			fenceToken = strconv.FormatInt(randomInt(rng), 10)
		}
		storeExp := now.add(time.Duration(rng.Int64N(int64(time.Hour))))
		args := completeArgs{
			fence:    fence{announce: announce{pubcmd: "PUBLISH", channel: prefix + ":ch"}, now: now.arg(), token: fenceToken},
			storeExp: storeExp.arg(), storeTTLMs: strconv.FormatInt(rng.Int64N(3_600_000)+60_000, 10),
			outcome: []byte(randomText(rng)),
		}.params().argv()
		base := prefix + ":" + strconv.Itoa(i)
		whole, edited := []string{base + ":whole", base + ":age"}, []string{base + ":edited", base + ":age"}
		for _, k := range []string{whole[0], edited[0]} {
			require.NoError(t, client.Set(ctx, k, rec, time.Hour).Err())
		}
		want, err := wholeCompleteScript.Run(ctx, client, whole, args...).Int64()
		require.NoError(t, err)
		got, err := completeScript.Run(ctx, client, edited, args...).Int64()
		require.NoError(t, err)
		require.Equal(t, want, got, "reply for record %q", rec)
		wantRec, err := client.Get(ctx, whole[0]).Result()
		require.NoError(t, err)
		gotRec, err := client.Get(ctx, edited[0]).Result()
		require.NoError(t, err)
		require.Equal(t, wantRec, gotRec, "record written for %q", rec)
		wantTTL, err := client.PTTL(ctx, whole[0]).Result()
		require.NoError(t, err)
		gotTTL, err := client.PTTL(ctx, edited[0]).Result()
		require.NoError(t, err)
		require.InDelta(t, wantTTL.Milliseconds(), gotTTL.Milliseconds(), 1000, "time to live of %q", rec)
		if want == fenceApplied {
			applied++
		} else {
			notHolder++
		}
		require.NoError(t, client.Del(ctx, whole[0], edited[0]).Err())
	}
	t.Logf("%d completed, %d not the holder's", applied, notHolder)
	assert.Greater(t, applied, 500, "the cases reach the edit")
	assert.Greater(t, notHolder, 200, "and the refusals")

	// A record hash of the previous layout is completed whole, and
	// converted to the packed layout.
	s, err := New(client, Options{Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	tok := LegacyClaim(t, s, "t", "old", "holder", time.Minute)
	key := s.keys.recordKey("t", "old")
	require.Equal(t, "hash", client.Type(ctx, key).Val())
	require.NoError(t, s.Complete(ctx, store.CompleteParams{Tenant: "t", Key: "old", Token: tok, Outcome: []byte("done")}))
	rec, err := s.Lookup(ctx, store.LookupParams{Tenant: "t", Key: "old"})
	require.NoError(t, err)
	assert.Equal(t, store.StateCompleted, rec.State)
	assert.Equal(t, []byte("done"), rec.Outcome)
	assert.Equal(t, "string", client.Type(ctx, key).Val(), "the completion converted it")
}
