package redisstore

import (
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/idempotency/store"
)

// DisablePolling makes s's Waits wake on notifications (and a lease running
// out by a real clock) alone, so a test can prove notifications arrive.
func DisablePolling(s *Store) { s.noPoll = true }

// RecordKey exposes the key layout to the tests.
func RecordKey(s *Store, tenant, key string) string { return s.keys.recordKey(tenant, key) }

// IndexKey exposes the key layout to the tests.
func IndexKey(s *Store, tenant string) string { return s.keys.indexKey(tenant) }

// TenantChannel exposes the sharded notification channel to the tests.
func TenantChannel(s *Store, tenant string) string { return s.keys.tenantChannel(tenant) }

// Channel exposes the notification channel to the tests.
func Channel(s *Store) string { return s.notes.channel }

// NewWithLocalClock is New with the store's server clock reading local as
// the worker's own clock, so a test can skew it.
func NewWithLocalClock(client redis.UniversalClient, opts Options, local store.Clock) (*Store, error) {
	return newStore(client, opts, local)
}

// AgeKey exposes the key layout to the tests.
func AgeKey(s *Store, tenant string) string { return s.keys.ageKey(tenant) }

// SetListBudget bounds the age index entries one List call of s walks.
func SetListBudget(s *Store, n int) { s.listBudget = n }

// Prefix exposes the store's prefix to the tests.
func Prefix(s *Store) string { return s.keys.prefix }

// Unpack exposes the packed record layout to the tests.
func Unpack(v string) (map[string]string, error) { return unpack(v) }
