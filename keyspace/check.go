package keyspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// CheckVersion opens every [Check]: a digest of checked arguments is never
// mistaken for a [Key] (which opens with [Version]), and a change to how
// checks are encoded changes it.
const CheckVersion = "c1"

const checkPrefix = CheckVersion + ":"

const keyedCheckPrefix = KeyedCheckVersion + ":"

// checkDomain opens the encoding of a check, apart from every key's.
const checkDomain = "github.com/tesserix/idempotency/keyspace check " + CheckVersion

// tagAbsent stands for a checked argument the arguments do not carry.
const tagAbsent = 'x'

// checkLen is the length of a Check: the prefix, 16 hex digits of the
// names' digest, a colon and 64 hex digits.
const checkLen = len(checkPrefix) + 16 + 1 + 64

// Check is the digest of the arguments an activity declares to be checked
// (arguments that are not part of the key, but must match the call that
// made the record): "c1:" ("c2:" under a [Secret]), 16 hexadecimal digits
// that stand for the names of the checked arguments, ":" and the 64
// hexadecimal digits of a SHA-256 of their values (an HMAC-SHA-256 under a
// [Secret]), 84 bytes in all. It never holds the values, and two digests
// are compared only when they check the same names ([Check.Comparable]): a
// declaration that checks other arguments than the one that made a record
// cannot tell whether the call matches.
type Check string

// CheckInput is what a [Check] is derived from.
type CheckInput struct {
	// Tenant, Run and Activity scope the digest as they scope the key, so
	// that equal values in two scopes give two digests and no table of
	// likely values precomputed for one scope serves another. They sit in
	// the record beside the digest, though: whoever reads a record can try
	// every likely value of a low-entropy argument (a card's last four
	// digits, an amount) against it in milliseconds, unless the digest is
	// derived under a [CheckInput.Secret]. Required.
	Tenant, Run, Activity string
	// Arguments are read as [Input.Arguments] is.
	Arguments any
	// Names are the checked arguments, as [Input.KeyArguments] names key
	// arguments. At least one. A checked argument the arguments do not
	// carry (or that encoding/json would omit) is encoded as absent, which
	// differs from every value, null included.
	Names []string
	// Secret, when set, keys the digest of the values (an HMAC-SHA-256
	// under it, [KeyedCheckVersion]), as [Input.Secret] keys a key.
	Secret *Secret
}

// DeriveCheck returns the digest of the checked arguments of in. Values
// are canonicalised as keys are (see the package documentation), so two
// spellings of one value are one digest. Errors are those of [Derive],
// except that a checked argument may be absent.
func DeriveCheck(in CheckInput) (c Check, err error) {
	switch {
	case in.Tenant == "":
		return "", &InputError{Field: "Tenant", Reason: "must not be empty"}
	case in.Run == "":
		return "", &InputError{Field: "Run", Reason: "must not be empty"}
	case in.Activity == "":
		return "", &InputError{Field: "Activity", Reason: "must not be empty"}
	case len(in.Names) == 0:
		return "", &InputError{Field: "Names", Reason: "must name at least one checked argument"}
	}
	var stack [maxStackNames]argName
	names, err := sortedNames(stack[:0], in.Names, "Names")
	if err != nil {
		return "", err
	}
	e := getEncoder()
	defer func() {
		if p := recover(); p != nil {
			c, err = "", &ValueError{Argument: e.arg, Reason: fmt.Sprintf("encoding the value panicked: %v", p)}
			return
		}
		putEncoder(e)
	}()

	// The names' digest: the domain and the sorted, normalised names.
	nb := appendField(nil, checkDomain)
	for _, n := range names {
		nb = appendField(nb, n.norm)
	}
	namesSum := sha256.Sum256(nb)

	buf := appendField(e.buf, checkDomain)
	buf = appendField(buf, in.Tenant)
	buf = appendField(buf, in.Run)
	buf = appendField(buf, in.Activity)
	e.buf = append(buf, tagObject)
	for _, n := range names {
		// One name at a time, so an absent one is told apart from an
		// error: encodeArguments writes the name, then the value.
		mark := len(e.buf)
		sub := Input{Tenant: in.Tenant, Run: in.Run, Activity: in.Activity, Arguments: in.Arguments, KeyArguments: []string{n.name}}
		err := e.encodeArguments(&sub, []argName{n})
		var missing *MissingArgumentError
		switch {
		case errors.As(err, &missing):
			e.buf = append(appendKey(e.buf[:mark], n.norm), tagAbsent)
		case err != nil:
			return "", err
		}
	}
	e.buf = append(e.buf, tagObjectEnd)
	prefix := checkPrefix
	var sum [32]byte
	if in.Secret != nil {
		prefix, sum = keyedCheckPrefix, in.Secret.sum(e.buf)
	} else {
		sum = sha256.Sum256(e.buf)
	}

	var b strings.Builder
	b.Grow(checkLen)
	b.WriteString(prefix)
	b.WriteString(hex.EncodeToString(namesSum[:8]))
	b.WriteByte(':')
	b.WriteString(hex.EncodeToString(sum[:]))
	return Check(b.String()), nil
}

// String returns the digest as text.
func (c Check) String() string { return string(c) }

// names returns the part of c that stands for its version and the checked
// names, or "" for a string that is not a Check of a current version.
func (c Check) names() string {
	s := string(c)
	if len(s) != checkLen || !(strings.HasPrefix(s, checkPrefix) || strings.HasPrefix(s, keyedCheckPrefix)) || s[len(checkPrefix)+16] != ':' {
		return ""
	}
	return s[:len(checkPrefix)+16]
}

// Comparable reports whether c and other can be compared: both are checks
// of one current version ([CheckVersion], or [KeyedCheckVersion]) over the
// same checked names. A record kept without a check (written before checks
// existed, or by a declaration that checks nothing), under other names or
// under the other version is not comparable: a call cannot be said to
// differ from it.
func (c Check) Comparable(other Check) bool {
	n := c.names()
	return n != "" && n == other.names()
}

// Differs reports whether c and other are comparable and differ: the call
// that made one and the call that made the other were given other values
// for the same checked arguments.
func (c Check) Differs(other Check) bool {
	return c.Comparable(other) && c != other
}
