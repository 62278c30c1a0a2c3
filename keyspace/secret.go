package keyspace

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"sync"
)

// KeyedVersion opens every [Key] derived under a [Secret]: an HMAC-SHA-256
// of the same canonical encoding as a [Version] key, keyed by the secret.
// The two never coincide (their prefixes differ), so a record made under
// one derivation never answers a call derived under the other.
const KeyedVersion = "k1"

// KeyedCheckVersion opens every [Check] derived under a [Secret].
const KeyedCheckVersion = "c2"

// MinSecretLength is the fewest bytes a [Secret] may have: 32, the size
// of SHA-256's output, below which the HMAC is no stronger than its key.
const MinSecretLength = 32

// MaxSecretGeneration bounds a [Secret]'s generation. A workflow records
// the generation its keys are derived under as a workflow.GetVersion
// version, an int.
const MaxSecretGeneration = 1 << 20

// Secret is a deployment secret under which keys and check digests are
// derived as HMAC-SHA-256 instead of SHA-256 ([KeyedVersion],
// [KeyedCheckVersion]). Whoever reads a record (the store, the search
// attribute, an error message) then cannot try likely argument values
// against its key or check: without the secret, a key reveals nothing of
// its arguments.
//
// Each secret has a generation, a small positive integer the operator
// numbers secrets by (1, 2, …): a workflow records the generation its calls
// are keyed under, and the worker that runs a call looks the secret up by
// it, so a rotation never changes the keys of a running workflow. Two
// secrets of one deployment must not share a generation.
//
// A Secret never prints its bytes: String and GoString name the
// generation only. It is safe for concurrent use.
type Secret struct {
	generation int
	key        []byte
	pool       sync.Pool // of *hmacState, reset between uses
}

// NewSecret returns the secret of the given generation (1 to
// [MaxSecretGeneration]) made of key, which must hold at least
// [MinSecretLength] bytes of random data (read them from a secret store,
// never from code). The key is copied. Errors match [ErrInvalidInput].
func NewSecret(generation int, key []byte) (*Secret, error) {
	switch {
	case generation < 1 || generation > MaxSecretGeneration:
		return nil, &InputError{Field: "Secret.Generation", Reason: "want 1 to " + strconv.Itoa(MaxSecretGeneration) + ", got " + strconv.Itoa(generation)}
	case len(key) < MinSecretLength:
		return nil, &InputError{Field: "Secret.Key", Reason: "want at least " + strconv.Itoa(MinSecretLength) + " bytes, got " + strconv.Itoa(len(key))}
	}
	s := &Secret{generation: generation, key: append([]byte(nil), key...)}
	s.pool.New = func() any { return &hmacState{h: hmac.New(sha256.New, s.key)} }
	return s, nil
}

// Generation returns the secret's generation.
func (s *Secret) Generation() int { return s.generation }

// fingerprintInput is what a secret's [Secret.Fingerprint] is the HMAC of.
// Every canonical encoding a key or check is the HMAC of ends with the end
// of an object ('}'); this string does not, so none of them is the
// fingerprint.
const fingerprintInput = "fingerprint of an idempotency key secret, layout 1"

// Fingerprint names the secret's bytes without revealing them: "f1:" and
// the hex of the HMAC-SHA-256, under the secret, of a fixed string. Two
// secrets of one generation with different bytes (a file that gained a
// trailing newline on one worker) have different fingerprints, so a store
// that records the fingerprint a generation's keys were first derived
// under can refuse the other bytes (interceptor.Options.KeySecret) instead
// of letting them derive other keys for the same calls. Whoever reads it
// learns nothing of the secret, as of a key.
func (s *Secret) Fingerprint() string {
	sum := s.sum([]byte(fingerprintInput))
	return "f1:" + hex.EncodeToString(sum[:])
}

// String names the secret by its generation, never its bytes.
func (s *Secret) String() string {
	if s == nil {
		return "keyspace.Secret(nil)"
	}
	return "keyspace.Secret(generation " + strconv.Itoa(s.generation) + ")"
}

// GoString is String, so that %#v does not print the bytes either.
func (s *Secret) GoString() string { return s.String() }

// hmacState is one keyed HMAC and the room its sum is written to (a
// slice handed to hash.Hash.Sum escapes: kept here, it costs no
// allocation).
type hmacState struct {
	h   hash.Hash
	out [sha256.Size]byte
}

// sum returns the HMAC-SHA-256 of b under s.
func (s *Secret) sum(b []byte) [sha256.Size]byte {
	st := s.pool.Get().(*hmacState)
	st.h.Reset()
	st.h.Write(b)
	st.h.Sum(st.out[:0])
	out := st.out
	s.pool.Put(st)
	return out
}
