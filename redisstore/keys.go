package redisstore

import (
	"encoding/base64"
	"strings"
)

// The key layout. For a prefix P and a tenant T, with E the unpadded
// base64url encoding of T's bytes:
//
//	P:{E}:r:<key>   string: one record, packed (record.go)
//	P:{E}:age       sorted set: the tenant's record keys scored by their
//	                claim's time (unix microseconds), for List, Forget,
//	                Sweep and CountBacklog
//	P:events        pub/sub channel: the record key of a waited-on change
//	P:{E}:events    the same, per tenant, as a sharded channel (SPUBLISH) on
//	                a Cluster that has sharded pub/sub
//	P:unindexed     string: set by a Store with Options.IndexOnlyWhatWaits
//	                before its first claim that no age index lists; while
//	                it exists every Store on the prefix lists, counts and
//	                sweeps by walking the record keys (walk.go)
//
// and, from the previous layout until Store.Migrate has run, P:{E}:idx, a
// set of the tenant's record keys, and records that are hashes.
//
// E is the Cluster hash tag, so all of a tenant's keys (and its sharded
// channel) share one slot and a script or a MULTI may touch a record and
// the tenant's index together. base64url has no
// '{' or '}', and is injective, so two different tenants never share a key.
// The key is last and the part before it has a fixed shape, so two different
// keys of one tenant never share a Redis key either.

// layout is the key layout of one prefix: the names of its keys, and the
// tenant and key a name found by a SCAN stands for.
type layout struct {
	prefix string
}

const (
	recordInfix     = ":r:"
	indexSuffix     = ":idx"
	ageSuffix       = ":age"
	channelSuffix   = ":events"
	unindexedSuffix = ":unindexed"
)

// tenantBase returns "P:{E}" for tenant.
func (l layout) tenantBase(tenant string) string {
	return l.prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "}"
}

// recordAndAgeKeys returns the record key of tenant's key and the
// tenant's age index, encoding the tenant once: the keys of a claim and
// of the fenced scripts.
func (l layout) recordAndAgeKeys(tenant, key string) []string {
	base := l.tenantBase(tenant)
	return []string{base + recordInfix + key, base + ageSuffix}
}

func (l layout) recordKey(tenant, key string) string {
	return l.tenantBase(tenant) + recordInfix + key
}

func (l layout) indexKey(tenant string) string {
	return l.tenantBase(tenant) + indexSuffix
}

func (l layout) ageKey(tenant string) string {
	return l.tenantBase(tenant) + ageSuffix
}

// tenantChannel is the tenant's sharded notification channel.
func (l layout) tenantChannel(tenant string) string {
	return l.tenantBase(tenant) + channelSuffix
}

// indexKeyOfAge returns the index set (previous layout) of the tenant whose
// age index is age.
func indexKeyOfAge(age string) string {
	return strings.TrimSuffix(age, ageSuffix) + indexSuffix
}

// agePattern matches every age index of the store; the prefix holds no
// glob characters (Options validation refuses them).
func (l layout) agePattern() string { return l.prefix + ":{*}" + ageSuffix }

// recordKeyOfAge returns the record key of member in the tenant whose age
// index is age.
func recordKeyOfAge(age, member string) string {
	return strings.TrimSuffix(age, ageSuffix) + recordInfix + member
}

// isTenantKey reports whether k, found by a SCAN, really is the tenant key
// ending in suffix: the glob's '*' also matches a record whose key happens
// to end in "}:age".
func (l layout) isTenantKey(k, suffix string) bool {
	rest, ok := strings.CutPrefix(k, l.prefix+":{")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, '}')
	return i >= 0 && rest[i:] == "}"+suffix
}

// tenantOfAge returns the tenant whose age index is age.
func (l layout) tenantOfAge(age string) (string, bool) {
	enc, ok := strings.CutPrefix(age, l.prefix+":{")
	if !ok {
		return "", false
	}
	enc, ok = strings.CutSuffix(enc, "}"+ageSuffix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// unindexedKey is the key whose existence says that some records of the
// prefix are in no age index (see walk.go). It has no hash tag: it is no
// tenant's, and no script touches it with a tenant's keys.
func (l layout) unindexedKey() string { return l.prefix + unindexedSuffix }

// recordPattern matches the record keys of tenant, or of every tenant
// when across, for SCAN's MATCH.
func (l layout) recordPattern(tenant string, across bool) string {
	if across {
		return l.prefix + ":{*}" + recordInfix + "*"
	}
	return globEscaper.Replace(l.tenantBase(tenant)+recordInfix) + "*"
}

// parseRecordKey returns the tenant and the key of the record key k, found
// by a SCAN; ok is false for a key that is no record key of the store.
func (l layout) parseRecordKey(k string) (tenant, key string, ok bool) {
	rest, ok := strings.CutPrefix(k, l.prefix+":{")
	if !ok {
		return "", "", false
	}
	i := strings.IndexByte(rest, '}') // base64url has none: the first ends E.
	if i < 0 {
		return "", "", false
	}
	key, ok = strings.CutPrefix(rest[i+1:], recordInfix)
	if !ok {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest[:i])
	if err != nil {
		return "", "", false
	}
	return string(b), key, true
}

// splitRecordKey splits a record key into its tenant's base ("P:{E}")
// and the record's key.
func (l layout) splitRecordKey(k string) (base, member string, ok bool) {
	rest, ok := strings.CutPrefix(k, l.prefix+":{")
	if !ok {
		return "", "", false
	}
	i := strings.IndexByte(rest, '}')
	if i < 0 {
		return "", "", false
	}
	member, ok = strings.CutPrefix(rest[i+1:], recordInfix)
	return k[:len(k)-len(rest)+i+1], member, ok
}
