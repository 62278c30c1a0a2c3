package keyspace

import (
	"encoding/hex"
	"strconv"
)

// Version is the encoding version every [Key] starts with. Any change to the
// canonical encoding, however small, changes the version, so that a key
// stored under one version never silently matches or misses a key derived
// under another.
const Version = "v1"

const keyPrefix = Version + ":"

const keyedPrefix = KeyedVersion + ":"

// keyLen is the length of a Key: the prefix and 64 hex digits.
const keyLen = len(keyPrefix) + 64

// Key is a canonical idempotency key: [Version], a colon and the 64
// lower-case hexadecimal digits of a SHA-256 digest, 67 bytes in all; or,
// derived under a [Secret], [KeyedVersion], a colon and the 64 digits of an
// HMAC-SHA-256, of the same length. Keys are compared as strings; two
// inputs that are spellings of one payload derive the same Key.
type Key string

// String returns the key as text, such as "v1:9f86d0…".
func (k Key) String() string { return string(k) }

// ParseKey checks that s has the form of a [Key] of the current [Version]
// or of [KeyedVersion] and returns it. An error matches [ErrInvalidInput].
func ParseKey(s string) (Key, error) {
	if len(s) != keyLen {
		return "", &InputError{Field: "Key", Reason: "want " + strconv.Itoa(keyLen) + " bytes (" + strconv.Quote(keyPrefix) + " and 64 hex digits), got " + strconv.Itoa(len(s))}
	}
	if p := s[:len(keyPrefix)]; p != keyPrefix && p != keyedPrefix {
		return "", &InputError{Field: "Key", Reason: "want prefix " + strconv.Quote(keyPrefix) + " or " + strconv.Quote(keyedPrefix) + ", got " + strconv.Quote(p)}
	}
	for i := len(keyPrefix); i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", &InputError{Field: "Key", Reason: "byte " + strconv.Itoa(i) + " is " + strconv.Quote(s[i:i+1]) + ", not a lower-case hex digit"}
		}
	}
	return Key(s), nil
}

// Keyed reports whether k was derived under a [Secret].
func (k Key) Keyed() bool {
	return len(k) > len(keyedPrefix) && string(k[:len(keyedPrefix)]) == keyedPrefix
}

func formatKeyAs(prefix string, sum [32]byte) Key {
	var b [keyLen]byte
	copy(b[:], prefix)
	hex.Encode(b[len(keyPrefix):], sum[:])
	return Key(b[:])
}
