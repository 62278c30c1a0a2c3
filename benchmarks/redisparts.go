package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
)

// redisPartsClaim is the work of the claim script of redisstore's previous
// layout (release 2: a record hash, a tenant index set), in parts: take
// a free key by writing a record hash of nine fields with its physical
// expiry, then, as ARGV[3] and ARGV[4] say, add the key to the tenant's
// index and publish the change. It does not judge leases, expiry or
// supersession, so it is a lower bound of the real script.
var redisPartsClaim = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'state', '1', 'holder', 'bench', 'token', ARGV[1], 'lease', ARGV[2], 'exp', ARGV[2],
	'created', ARGV[2], 'updated', ARGV[2], 'outcome', '', 'reason', '')
redis.call('PEXPIRE', KEYS[1], 600000)
if ARGV[3] == '1' then redis.call('SADD', KEYS[2], KEYS[1]) end
if ARGV[4] == '1' then redis.call('PUBLISH', KEYS[3], KEYS[1]) end
return 1`)

// redisPartsComplete records the outcome when the token still holds the
// key, and publishes when ARGV[4] says so.
var redisPartsComplete = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', '2', 'outcome', ARGV[3], 'updated', ARGV[2], 'exp', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 600000)
if ARGV[4] == '1' then redis.call('PUBLISH', KEYS[3], KEYS[1]) end
return 1`)

// redisPartsDesign is the previous layout's per-key work done by a minimal
// script, with the tenant index and the notification switched on or off:
// the rungs that showed what a script and a record hash cost, kept to
// compare the current layout with.
func redisPartsDesign(name string, rc redis.UniversalClient, prefix string, index, publish bool) design {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	idx, events := prefix+":parts:{t}:idx", prefix+":parts:events"
	return design{
		name: name,
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			tok := store.NewToken()
			now := strconv.FormatInt(time.Now().UnixMicro(), 10)
			n, err := redisPartsClaim.Run(ctx, rc, []string{prefix + ":parts:{t}:r:" + key, idx, events},
				strconv.FormatInt(tok, 10), now, flag(index), flag(publish)).Int()
			return n == 1, tok, err
		},
		complete: func(ctx context.Context, key string, token int64) error {
			now := strconv.FormatInt(time.Now().UnixMicro(), 10)
			return redisPartsComplete.Run(ctx, rc, []string{prefix + ":parts:{t}:r:" + key, idx, events},
				strconv.FormatInt(token, 10), now, "ok", flag(publish)).Err()
		},
	}
}

// redisPackedComplete records the outcome on a packed record (a string
// "p|token|…") while the token still holds it.
var redisPackedComplete = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, 1, 2 + #ARGV[1]) ~= 'p|' .. ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)

// redisPackedDesign is redisstore's layout (since release 3) written by
// hand with nothing around it: the record packed into one string, claimed
// without a script by SET NX GET (which answers a duplicate with the
// record that stands, in the same command) and completed by a
// two-command script. It parses nothing, judges no lease or expiry and
// keeps no retention, so it is the most the layout can give; the gap from
// it to redisstore is the store's own work. With index, the claim also
// adds the key to the tenant's age index (ZADD NX, in the same MULTI), as
// redisstore does.
func redisPackedDesign(rc redis.UniversalClient, prefix string, index bool) design {
	name := "packed string, SET NX GET"
	if index {
		name += " + ZADD NX"
	}
	return design{
		name: name,
		claim: func(ctx context.Context, key string) (bool, int64, error) {
			tok := store.NewToken()
			now := time.Now().UnixMicro()
			rec := "p|" + strconv.FormatInt(tok, 10) + "|bench|" + strconv.FormatInt(now+benchLease.Microseconds(), 10) +
				"|" + strconv.FormatInt(now+redisTTL.Microseconds(), 10) + "|" + strconv.FormatInt(now, 10)
			rkey := prefix + ":packed:{t}:r:" + key
			var set *redis.StatusCmd
			var err error
			if index {
				_, err = rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
					set = p.SetArgs(ctx, rkey, rec, redis.SetArgs{Mode: "NX", Get: true, TTL: redisTTL})
					p.ZAddNX(ctx, prefix+":packed:{t}:age", redis.Z{Score: float64(now), Member: key})
					return nil
				})
				if errors.Is(err, redis.Nil) {
					err = nil
				}
				if err == nil {
					err = set.Err()
				}
			} else {
				err = rc.SetArgs(ctx, rkey, rec, redis.SetArgs{Mode: "NX", Get: true, TTL: redisTTL}).Err()
			}
			if errors.Is(err, redis.Nil) {
				return true, tok, nil
			}
			return false, 0, err
		},
		complete: func(ctx context.Context, key string, token int64) error {
			t := strconv.FormatInt(token, 10)
			return redisPackedComplete.Run(ctx, rc, []string{prefix + ":packed:{t}:r:" + key}, t,
				"c|"+t+"|bench|ok", strconv.FormatInt(redisTTL.Milliseconds(), 10)).Err()
		},
	}
}

// redisSparseDesign is redisstore with Options.IndexOnlyWhatWaits: the
// claim of a free key is SET NX GET PX alone, with no MULTI and no age
// index entry. Its store is never closed: it starts no subscriber (nothing
// Waits on it), so Close would only cancel a context nobody waits on, and
// a design has no end to close it at.
func redisSparseDesign(rc redis.UniversalClient, prefix string) design {
	s, err := redisstore.New(rc, redisstore.Options{Prefix: prefix + ":sparse", TTL: redisTTL, IndexOnlyWhatWaits: true})
	if err != nil {
		panic(err) // The options are constant and valid.
	}
	return libraryDesign("redisstore, index only what waits", s)
}
