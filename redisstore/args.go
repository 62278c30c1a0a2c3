package redisstore

import (
	"strconv"
	"strings"
)

// The scripts' arguments and replies. Each script of scripts.go that takes
// arguments has a struct below; its params method lists them, by name, in
// ARGV's order. A call fills the struct, so every value it passes is
// named, and argv returns the ARGV slice. The script's text begins with a
// local per argument of the same name (argvLua), generated from the same
// list, so the Lua and the Go cannot disagree on a position.

// param is one argument of a script: the name of the Lua local that holds
// it and the value a call passes.
type param struct {
	name  string
	value any // a string or []byte, as go-redis writes them
}

// paramList is a script's arguments in ARGV's order.
type paramList []param

// argv returns the arguments' values, in order, as go-redis takes them.
func (l paramList) argv() []any {
	v := make([]any, len(l))
	for i, p := range l {
		v[i] = p.value
	}
	return v
}

// argvLua is the Lua that opens a script taking l: one local per argument,
// named as l names it, holding ARGV at its position. A name listed twice
// would leave a position unread: it panics, when the package is loaded.
func argvLua(l paramList) string {
	var b strings.Builder
	b.WriteString("\n")
	seen := make(map[string]bool, len(l))
	for i, p := range l {
		if seen[p.name] {
			panic("redisstore: a script lists its argument " + p.name + " twice")
		}
		seen[p.name] = true
		b.WriteString("local " + p.name + " = ARGV[" + strconv.Itoa(i+1) + "]\n")
	}
	return b.String()
}

// luaInts is the Lua of a list of integer constants, for a multiple
// assignment.
func luaInts(v ...int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// announce is how a script that may wake a Wait announces a change: the
// publish command (PUBLISH, or SPUBLISH on a Cluster that has sharded
// pub/sub) and the channel. Every such script takes them first.
type announce struct {
	pubcmd, channel string
}

func (a announce) params() paramList {
	return paramList{{"pubcmd", a.pubcmd}, {"channel", a.channel}}
}

// fence names the claim a fenced script acts for: now (the store's clock,
// unix µs) and the claim's token, both as decimal text.
type fence struct {
	announce
	now, token string
}

func (f fence) params() paramList {
	return append(f.announce.params(), param{"now", f.now}, param{"token", f.token})
}

// claimArgs are claimScript's arguments: the record a claim writes (now
// is its claim and update time), the token it supersedes ("0" for none),
// the record's physical TTL, its member in the age index and the index's
// TTL (ms), and what the record keeps: its origin (JSON), check digest and
// own retention (µs), each "" for none.
type claimArgs struct {
	announce
	now, holder, token, leaseUntil, exp, supersede string
	ttlMs, member, ageTTLMs                        string
	origin, check, ret                             string
}

func (a claimArgs) params() paramList {
	return append(a.announce.params(),
		param{"now", a.now}, param{"holder", a.holder}, param{"token", a.token},
		param{"lease_until", a.leaseUntil}, param{"exp", a.exp}, param{"supersede", a.supersede},
		param{"ttl_ms", a.ttlMs}, param{"member", a.member}, param{"age_ttl_ms", a.ageTTLMs},
		param{"origin", a.origin}, param{"check", a.check}, param{"ret", a.ret})
}

// claimScript's replies: its first element.
const (
	claimAcquired = "acquired" // the claim holds the key
	claimHeld     = "held"     // a live record stopped it; the second element is that record, packed
)

// The fenced scripts' replies (renew, complete, release, mark and undo).
const (
	fenceNotHolder = 0 // the token holds no live pending claim; nothing changed
	fenceApplied   = 1 // done (undoClaimScript: the claim deleted)
	undoLeaseEnded = 2 // undoClaimScript: a takeover left standing, its lease ended
)

// renewArgs are renewScript's arguments: the new lease, and the expiry,
// physical TTL and index TTL (ms) the store's TTL gives a write at now
// (the record's own retention, when it keeps one, overrides them: see
// ownWindow), and the record's member in the age index.
type renewArgs struct {
	fence
	leaseUntil, storeExp, storeTTLMs, storeAgeTTLMs, member string
}

func (a renewArgs) params() paramList {
	return append(a.fence.params(), param{"lease_until", a.leaseUntil},
		param{"store_exp", a.storeExp}, param{"store_ttl_ms", a.storeTTLMs}, param{"store_age_ttl_ms", a.storeAgeTTLMs},
		param{"member", a.member})
}

// completeArgs are completeScript's arguments: the expiry and physical
// TTL by the store's TTL (see renewArgs), and the outcome.
type completeArgs struct {
	fence
	storeExp, storeTTLMs string
	outcome              []byte
}

func (a completeArgs) params() paramList {
	return append(a.fence.params(), param{"store_exp", a.storeExp}, param{"store_ttl_ms", a.storeTTLMs},
		param{"outcome", a.outcome})
}

// releaseArgs are the arguments of releaseScript and undoClaimScript: the
// record's member in the age index.
type releaseArgs struct {
	fence
	member string
}

func (a releaseArgs) params() paramList {
	return append(a.fence.params(), param{"member", a.member})
}

// markArgs are markScript's arguments: the record's new expiry and
// physical TTL, the reason, and the record's member in the age index.
type markArgs struct {
	fence
	exp, ttlMs, reason, member string
}

func (a markArgs) params() paramList {
	return append(a.fence.params(), param{"exp", a.exp}, param{"ttl_ms", a.ttlMs}, param{"reason", a.reason},
		param{"member", a.member})
}

// resolveArgs are resolveScript's arguments: the decision ("complete" or
// "free"), the outcome, the expiry and physical TTL by the store's TTL for
// a record that stands, its member in the age index, the fence token ("0"
// for none), the resolution (JSON), record_if_gone and stale ("1" or "0"),
// and the record made for record_if_gone: its holder and token, check and
// own retention ("" for none), expiry and physical TTL.
type resolveArgs struct {
	announce
	now, decision                              string
	outcome                                    []byte
	storeExp, storeTTLMs, member, token        string
	resolution                                 []byte
	recordIfGone, goneHolder, goneToken, stale string
	goneCheck, goneRet, goneExp, goneTTLMs     string
}

func (a resolveArgs) params() paramList {
	return append(a.announce.params(),
		param{"now", a.now}, param{"decision", a.decision}, param{"outcome", a.outcome},
		param{"store_exp", a.storeExp}, param{"store_ttl_ms", a.storeTTLMs}, param{"member", a.member},
		param{"token", a.token}, param{"resolution", a.resolution}, param{"record_if_gone", a.recordIfGone},
		param{"gone_holder", a.goneHolder}, param{"gone_token", a.goneToken}, param{"stale", a.stale},
		param{"gone_check", a.goneCheck}, param{"gone_ret", a.goneRet},
		param{"gone_exp", a.goneExp}, param{"gone_ttl_ms", a.goneTTLMs})
}

// resolveScript's replies.
const (
	resolveApplied          = 1
	resolveNotFound         = -1 // no live record, and record_if_gone is "0"
	resolveNotIndeterminate = -2 // the record is not indeterminate (nor, with stale, pending)
	resolveOtherToken       = -3 // it stands under another token than the fence
	resolveLeaseLive        = -4 // with stale: pending under the fence, within its lease
)

// membersArgs are the arguments of forgetScript and sweepScript: a fixed
// head, then one member per record key, ARGV[i] the member of KEYS[i]
// (both from 3).
type membersArgs struct {
	head    paramList
	members []string
}

func (a membersArgs) argv() []any {
	v := make([]any, 0, len(a.head)+len(a.members))
	v = append(v, a.head.argv()...)
	for _, m := range a.members {
		v = append(v, m)
	}
	return v
}

// sweepHead is sweepScript's head: now, and how many records at most it
// deletes.
type sweepHead struct {
	now, limit string
}

func (h sweepHead) params() paramList {
	return paramList{{"now", h.now}, {"limit", h.limit}}
}

// migrateArgs are migrateScript's arguments: the record's member in the
// age index.
type migrateArgs struct {
	member string
}

func (a migrateArgs) params() paramList {
	return paramList{{"member", a.member}}
}
