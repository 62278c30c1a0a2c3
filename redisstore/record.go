package redisstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tesserix/idempotency/store"
)

// pairs turns a flat HGETALL reply from a script into a map.
func pairs(flat []any) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[k] = v
	}
	return m
}

// parseRecord builds a Record from the fields of a record hash.
func parseRecord(tenant, key string, m map[string]string) (store.Record, error) {
	state, err := store.ParseState(m["state"])
	if err != nil {
		return store.Record{}, fmt.Errorf("record of tenant %q key %q: %w", tenant, key, err)
	}
	r := store.Record{
		Tenant: tenant,
		Key:    key,
		State:  state,
		Holder: m["holder"],
		Reason: m["reason"],
		Check:  m["check"],
	}
	if ret := m["ret"]; ret != "" {
		us, err := strconv.ParseInt(ret, 10, 64)
		if err != nil {
			return store.Record{}, fmt.Errorf("record of tenant %q key %q: ret: %w", tenant, key, err)
		}
		r.Retention = time.Duration(us) * time.Microsecond
	}
	if o := m["outcome"]; o != "" {
		r.Outcome = []byte(o)
	}
	if o := m["origin"]; o != "" {
		if err := json.Unmarshal([]byte(o), &r.Origin); err != nil {
			return store.Record{}, fmt.Errorf("record of tenant %q key %q: origin: %w", tenant, key, err)
		}
	}
	if o := m["resolution"]; o != "" {
		if err := json.Unmarshal([]byte(o), &r.Resolution); err != nil {
			return store.Record{}, fmt.Errorf("record of tenant %q key %q: resolution: %w", tenant, key, err)
		}
	}
	if r.Token, err = strconv.ParseInt(m["token"], 10, 64); err != nil {
		return store.Record{}, fmt.Errorf("record of tenant %q key %q: token: %w", tenant, key, err)
	}
	var lease, exp, created, updated int64
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"lease", &lease}, {"exp", &exp}, {"created", &created}, {"updated", &updated}} {
		if *f.dst, err = strconv.ParseInt(m[f.name], 10, 64); err != nil {
			return store.Record{}, fmt.Errorf("record of tenant %q key %q: %s: %w", tenant, key, f.name, err)
		}
	}
	r.LeaseUntil = stamp(lease).time()
	r.ExpiresAt = stamp(exp).time()
	r.CreatedAt = stamp(created).time()
	r.UpdatedAt = stamp(updated).time()
	return r, nil
}
