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

// recordWriter writes a packed record field by field, into one buffer and
// without naming the fields: its caller writes the fixed fields
// (headerFields) and then the variable ones (varFields), every one of
// them, in the layout's order. Numbers are written as decimal text
// straight into the buffer, so a record costs one allocation, its string.
type recordWriter struct{ b strings.Builder }

// begin starts the record, with room for size bytes after the version.
func (w *recordWriter) begin(size int) {
	w.b.Grow(len(packVersion) + 1 + size)
	w.b.WriteString(packVersion)
	w.b.WriteByte('|')
}

// text writes a fixed field.
func (w *recordWriter) text(v string) {
	w.b.WriteString(v)
	w.b.WriteByte('|')
}

// int writes a fixed field holding v, in decimal.
func (w *recordWriter) int(v int64) {
	var buf [20]byte
	w.b.Write(strconv.AppendInt(buf[:0], v, 10))
	w.b.WriteByte('|')
}

// optInt writes a fixed field holding v, or "" (none) unless v is
// positive.
func (w *recordWriter) optInt(v int64) {
	if v <= 0 {
		w.b.WriteByte('|')
		return
	}
	w.int(v)
}

// bytes writes a variable field: its length, a colon, and v.
func (w *recordWriter) bytes(v string) {
	var buf [20]byte
	w.b.Write(strconv.AppendInt(buf[:0], int64(len(v)), 10))
	w.b.WriteByte(':')
	w.b.WriteString(v)
}

// decLen is the length of v in decimal (at most: a sign counts one more).
func decLen(v int64) int {
	n := 1
	if v < 0 {
		n++
		v = -v
	}
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// String returns the record written.
func (w *recordWriter) String() string { return w.b.String() }

// packClaim returns the packed record a claim writes: pending under token
// (its decimal text), leased until lease, expiring at exp, written and
// claimed at now, keeping retention ret (microseconds, 0 for none), and the
// claim's holder, check digest and origin (JSON, "" for none). It is
// byte for byte what the previous release's map packer wrote for the same
// fields (TestPackClaimIsThePreviousPacker).
func packClaim(token string, lease, exp, now stamp, ret int64, holder, check, origin string) string {
	var w recordWriter
	w.begin(len("pending") + len(token) + decLen(int64(lease)) + decLen(int64(exp)) + 2*decLen(int64(now)) +
		decLen(ret) + len(headerFields) + // the separators
		decLen(int64(len(holder))) + len(holder) + decLen(int64(len(check))) + len(check) +
		decLen(int64(len(origin))) + len(origin) + 3*len("0") + len(varFields)) // and the colons
	w.text("pending")   // state
	w.text(token)       // token
	w.int(int64(lease)) // lease
	w.int(int64(exp))   // exp
	w.int(int64(now))   // updated
	w.int(int64(now))   // created
	w.optInt(ret)       // ret
	w.text("")          // sup
	w.text("")          // w
	w.bytes(holder)     // holder
	w.bytes(check)      // check
	w.bytes(origin)     // origin
	w.bytes("")         // outcome
	w.bytes("")         // reason
	w.bytes("")         // resolution
	return w.String()
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
