package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tesserix/idempotency/store"
)

// The packed record layout: one string,
//
//	2|state|token|lease|exp|updated|created|ret|sup|w|<n>:holder<n>:check<n>:origin<n>:outcome<n>:reason<n>:resolution
//
// a version, the fixed fields (decimal text, or "" for none) each ended by
// '|', then the variable ones, each its length in bytes in decimal, a
// colon, and its bytes (binary-safe). The fields mean what the record
// hash's of the same names meant in the previous layout: see the package
// documentation. scripts.go's pack_rec and unpack_rec are the same code in
// Lua.

// packVersion starts every packed record.
const packVersion = "2"

// headerFields and varFields are the packed layout's fields, in order.
var (
	headerFields = [...]string{"state", "token", "lease", "exp", "updated", "created", "ret", "sup", "w"}
	varFields    = [...]string{"holder", "check", "origin", "outcome", "reason", "resolution"}
)

// packed is a record being packed: its fields by name.
type packed map[string]string

// pack returns the packed string of the record whose fields are f.
func pack(f packed) string {
	var b strings.Builder
	n := len(packVersion) + 1 + len(headerFields)
	for _, k := range headerFields {
		n += len(f[k])
	}
	for _, k := range varFields {
		n += len(f[k]) + 4
	}
	b.Grow(n)
	b.WriteString(packVersion)
	b.WriteByte('|')
	for _, k := range headerFields {
		b.WriteString(f[k])
		b.WriteByte('|')
	}
	for _, k := range varFields {
		v := f[k]
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

// errMalformed reports a string that is not a packed record.
var errMalformed = errors.New("malformed packed record")

// unpack returns the fields of the packed record s, by name, as a record
// hash of the previous layout held them.
func unpack(s string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(s, packVersion+"|")
	if !ok {
		return nil, fmt.Errorf("%w: version %.8q", errMalformed, s)
	}
	m := make(map[string]string, len(headerFields)+len(varFields))
	for _, k := range headerFields {
		i := strings.IndexByte(rest, '|')
		if i < 0 {
			return nil, fmt.Errorf("%w: field %s", errMalformed, k)
		}
		if i > 0 {
			m[k] = rest[:i]
		}
		rest = rest[i+1:]
	}
	for _, k := range varFields {
		i := strings.IndexByte(rest, ':')
		if i < 0 {
			return nil, fmt.Errorf("%w: field %s", errMalformed, k)
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n < 0 || n > len(rest)-i-1 {
			return nil, fmt.Errorf("%w: length of %s", errMalformed, k)
		}
		if n > 0 {
			m[k] = rest[i+1 : i+1+n]
		}
		rest = rest[i+1+n:]
	}
	return m, nil
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
