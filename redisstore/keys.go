package redisstore

import (
	"encoding/base64"
	"strings"
)

// The key layout. For a prefix P and a tenant T, with E the unpadded
// base64url encoding of T's bytes:
//
//	P:{E}:r:<key>   hash: one record
//	P:{E}:idx       set: the keys of the tenant's records, for Forget and Sweep
//	P:{E}:age       sorted set: the same keys scored by their claim's time
//	                (unix microseconds), for List
//	P:events        pub/sub channel: the record key of a waited-on change
//
// E is the Cluster hash tag, so all of a tenant's keys share one slot and a
// script may touch a record and the tenant's index together. base64url has no
// '{' or '}', and is injective, so two different tenants never share a key.
// The key is last and the part before it has a fixed shape, so two different
// keys of one tenant never share a Redis key either.

const (
	recordInfix = ":r:"
	indexSuffix = ":idx"
	ageSuffix   = ":age"
)

// tenantBase returns "P:{E}" for tenant.
func (s *Store) tenantBase(tenant string) string {
	return s.prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + "}"
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

// ageKeyOfIndex returns the age index of the tenant whose index key is idx.
func ageKeyOfIndex(idx string) string {
	return strings.TrimSuffix(idx, indexSuffix) + ageSuffix
}

// indexPattern matches every tenant index of the store; the prefix holds no
// glob characters (Options validation refuses them).
func (s *Store) indexPattern() string {
	return s.prefix + ":{*}" + indexSuffix
}

// recordKeyOfIndex returns the record key of member in the tenant whose index
// key is idx.
func recordKeyOfIndex(idx, member string) string {
	return strings.TrimSuffix(idx, indexSuffix) + recordInfix + member
}

// isIndexKey reports whether k, found by a SCAN with indexPattern, really is
// a tenant index: the glob's '*' also matches a record whose key happens to
// end in "}:idx".
func (s *Store) isIndexKey(k string) bool {
	rest, ok := strings.CutPrefix(k, s.prefix+":{")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, '}')
	return i >= 0 && rest[i:] == "}"+indexSuffix
}

// tenantOfIndex returns the tenant whose index key is idx.
func (s *Store) tenantOfIndex(idx string) (string, bool) {
	enc, ok := strings.CutPrefix(idx, s.prefix+":{")
	if !ok {
		return "", false
	}
	enc, ok = strings.CutSuffix(enc, "}"+indexSuffix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}
