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

const (
	recordInfix     = ":r:"
	indexSuffix     = ":idx"
	ageSuffix       = ":age"
	channelSuffix   = ":events"
	unindexedSuffix = ":unindexed"
)

// tenantBase returns "P:{E}" for tenant.
func (s *Store) tenantBase(tenant string) string {
	return s.prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "}"
}

// recordAndAgeKeys returns the record key of tenant's key and the
// tenant's age index, encoding the tenant once: the keys of a claim and
// of the fenced scripts.
func (s *Store) recordAndAgeKeys(tenant, key string) []string {
	base := s.tenantBase(tenant)
	return []string{base + recordInfix + key, base + ageSuffix}
}

func (s *Store) recordKey(tenant, key string) string {
	return s.tenantBase(tenant) + recordInfix + key
}

func (s *Store) indexKey(tenant string) string {
	return s.tenantBase(tenant) + indexSuffix
}

func (s *Store) ageKey(tenant string) string {
	return s.tenantBase(tenant) + ageSuffix
}

// tenantChannel is the tenant's sharded notification channel.
func (s *Store) tenantChannel(tenant string) string {
	return s.tenantBase(tenant) + channelSuffix
}

// indexKeyOfAge returns the index set (previous layout) of the tenant whose
// age index is age.
func indexKeyOfAge(age string) string {
	return strings.TrimSuffix(age, ageSuffix) + indexSuffix
}

// agePattern matches every age index of the store; the prefix holds no
// glob characters (Options validation refuses them).
func (s *Store) agePattern() string { return s.prefix + ":{*}" + ageSuffix }

// recordKeyOfAge returns the record key of member in the tenant whose age
// index is age.
func recordKeyOfAge(age, member string) string {
	return strings.TrimSuffix(age, ageSuffix) + recordInfix + member
}

// isTenantKey reports whether k, found by a SCAN, really is the tenant key
// ending in suffix: the glob's '*' also matches a record whose key happens
// to end in "}:age".
func (s *Store) isTenantKey(k, suffix string) bool {
	rest, ok := strings.CutPrefix(k, s.prefix+":{")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, '}')
	return i >= 0 && rest[i:] == "}"+suffix
}

// tenantOfAge returns the tenant whose age index is age.
func (s *Store) tenantOfAge(age string) (string, bool) {
	enc, ok := strings.CutPrefix(age, s.prefix+":{")
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
func (s *Store) unindexedKey() string { return s.prefix + unindexedSuffix }

// recordPattern matches the record keys of tenant, or of every tenant
// when across, for SCAN's MATCH.
func (s *Store) recordPattern(tenant string, across bool) string {
	if across {
		return s.prefix + ":{*}" + recordInfix + "*"
	}
	return globEscaper.Replace(s.tenantBase(tenant)+recordInfix) + "*"
}

// parseRecordKey returns the tenant and the key of the record key k, found
// by a SCAN; ok is false for a key that is no record key of the store.
func (s *Store) parseRecordKey(k string) (tenant, key string, ok bool) {
	rest, ok := strings.CutPrefix(k, s.prefix+":{")
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
