package keyspace_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tesserix/idempotency/keyspace"
)

func mustSecret(t testing.TB, generation int, fill byte) *keyspace.Secret {
	t.Helper()
	s, err := keyspace.NewSecret(generation, bytes.Repeat([]byte{fill}, keyspace.MinSecretLength))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSecretRefusesWeakOrMisnumbered(t *testing.T) {
	for _, tc := range []struct {
		gen int
		key []byte
	}{
		{0, make([]byte, 32)},
		{-1, make([]byte, 32)},
		{keyspace.MaxSecretGeneration + 1, make([]byte, 32)},
		{1, make([]byte, 31)},
		{1, nil},
	} {
		if _, err := keyspace.NewSecret(tc.gen, tc.key); !errors.Is(err, keyspace.ErrInvalidInput) {
			t.Errorf("NewSecret(%d, %d bytes) = %v, want ErrInvalidInput", tc.gen, len(tc.key), err)
		}
	}
}

func TestSecretNeverPrintsItsBytes(t *testing.T) {
	key := []byte("0123456789abcdef0123456789ABCDEF-secret")
	s, err := keyspace.NewSecret(7, key)
	if err != nil {
		t.Fatal(err)
	}
	key[0] = 'X' // the secret copied it
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(f, s)
		if strings.Contains(out, "0123456789") || strings.Contains(out, "secret") {
			t.Errorf("%s prints %q", f, out)
		}
		if !strings.Contains(out, "7") {
			t.Errorf("%s prints %q, which does not name the generation", f, out)
		}
	}
	a, _ := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Secret: s})
	b, _ := keyspace.Derive(keyspace.Input{Tenant: "t", Run: "r", Activity: "a", Secret: mustSecretBytes(t, 7, []byte("0123456789abcdef0123456789ABCDEF-secret"))})
	if a != b {
		t.Errorf("the caller's change to its slice changed the secret: %s != %s", a, b)
	}
}

func mustSecretBytes(t testing.TB, gen int, key []byte) *keyspace.Secret {
	t.Helper()
	s, err := keyspace.NewSecret(gen, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeyedDerivation(t *testing.T) {
	in := keyspace.Input{Tenant: "acme", Run: "run-1", Activity: "charge",
		Arguments: map[string]any{"last4": "4242", "cents": 1999}, KeyArguments: []string{"last4", "cents"}}
	plain, err := keyspace.Derive(in)
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := mustSecret(t, 1, 1), mustSecret(t, 2, 2)
	in.Secret = s1
	k1, err := keyspace.Derive(in)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := keyspace.Derive(in)
	in.Secret = s2
	k2, _ := keyspace.Derive(in)
	// Another spelling of the same payload: one key under one secret.
	in.Secret = s1
	in.Arguments = map[string]any{"cents": 1999.0, "last4": "4242"}
	spelled, _ := keyspace.Derive(in)

	switch {
	case !strings.HasPrefix(string(k1), keyspace.KeyedVersion+":") || len(k1) != len(plain):
		t.Errorf("keyed key %q: want prefix %q and the length of %q", k1, keyspace.KeyedVersion+":", plain)
	case k1 == plain || k1[3:] == plain[3:]:
		t.Errorf("keyed key %q is the unkeyed one %q", k1, plain)
	case k1 != again || k1 != spelled:
		t.Errorf("keyed derivation is not canonical: %q, %q, %q", k1, again, spelled)
	case k1 == k2:
		t.Errorf("two secrets derive one key %q", k1)
	case !k1.Keyed() || plain.Keyed():
		t.Errorf("Keyed: %v for %q, %v for %q", k1.Keyed(), k1, plain.Keyed(), plain)
	}
	if got, err := keyspace.ParseKey(string(k1)); err != nil || got != k1 {
		t.Errorf("ParseKey(%q) = %q, %v", k1, got, err)
	}
}

func TestKeyedChecks(t *testing.T) {
	in := keyspace.CheckInput{Tenant: "acme", Run: "run-1", Activity: "charge",
		Arguments: map[string]any{"cents": 1999}, Names: []string{"cents"}}
	plain, err := keyspace.DeriveCheck(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Secret = mustSecret(t, 1, 1)
	keyed, err := keyspace.DeriveCheck(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Arguments = map[string]any{"cents": 2000}
	other, _ := keyspace.DeriveCheck(in)
	switch {
	case !strings.HasPrefix(string(keyed), keyspace.KeyedCheckVersion+":") || len(keyed) != len(plain):
		t.Errorf("keyed check %q: want prefix %q and the length of %q", keyed, keyspace.KeyedCheckVersion+":", plain)
	case plain.Comparable(keyed) || keyed.Comparable(plain) || plain.Differs(keyed):
		t.Errorf("an unkeyed and a keyed check are compared: %q, %q", plain, keyed)
	case !keyed.Comparable(other) || !keyed.Differs(other) || keyed.Differs(keyed):
		t.Errorf("two keyed checks of one secret are not compared: %q, %q", keyed, other)
	}
}

// TestKeyedKeysRevealNoLowEntropyArgument tries what issue 35 did against
// an unkeyed record: every card ending and every amount up to 100.00,
// against a record's key, with the record's other inputs. It finds the
// arguments of the unkeyed key, and nothing of the keyed one without the
// secret.
func TestKeyedKeysRevealNoLowEntropyArgument(t *testing.T) {
	if testing.Short() {
		t.Skip("a brute force of 10^4 candidates")
	}
	secret := mustSecret(t, 1, 9)
	in := keyspace.Input{Tenant: "acme", Run: "run-1", Activity: "charge",
		Arguments: map[string]any{"last4": "4242", "cents": 1999}, KeyArguments: []string{"last4", "cents"}}
	plain, _ := keyspace.Derive(in)
	in.Secret = secret
	keyed, _ := keyspace.Derive(in)

	try := func(target keyspace.Key, with *keyspace.Secret) (found string) {
		for last4 := 4200; last4 < 4300; last4++ {
			for cents := 1900; cents < 2000+1; cents++ {
				k, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "run-1", Activity: "charge",
					Arguments: map[string]any{"last4": fmt.Sprint(last4), "cents": cents}, KeyArguments: []string{"last4", "cents"}, Secret: with})
				if err != nil {
					t.Fatal(err)
				}
				if k == target {
					return fmt.Sprintf("%d/%d", last4, cents)
				}
			}
		}
		return ""
	}
	if got := try(plain, nil); got != "4242/1999" {
		t.Fatalf("the unkeyed key gave %q back, want 4242/1999 (the brute force itself is broken)", got)
	}
	if got := try(keyed, nil); got != "" {
		t.Errorf("the keyed key gave %q back without the secret", got)
	}
	if got := try(keyed, mustSecret(t, 1, 8)); got != "" {
		t.Errorf("the keyed key gave %q back under another secret", got)
	}
	if got := try(keyed, secret); got != "4242/1999" {
		t.Errorf("under its own secret the keyed key gave %q, want 4242/1999", got)
	}
}

// TestKeyedGolden pins the keyed encoding: the key below was computed
// outside this package, with Python's hmac over the bytes the package
// documentation lists (field(domain) field("acme") field("run_1")
// field("book") '{' 's' 6 "flight" 's' 5 "BA117" '}'), keyed by 32 bytes
// of 0x42. A change to it is a new KeyedVersion.
func TestKeyedGolden(t *testing.T) {
	s := mustSecretBytes(t, 1, bytes.Repeat([]byte{0x42}, 32))
	k, err := keyspace.Derive(keyspace.Input{Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments: map[string]any{"flight": "BA117"}, KeyArguments: []string{"flight"}, Secret: s})
	if err != nil {
		t.Fatal(err)
	}
	if want := keyspace.Key("k1:368357119821564954531918813334c3597d4b3bef5bf616cfbebf8c47135de1"); k != want {
		t.Errorf("keyed key = %s, want %s", k, want)
	}
	c, err := keyspace.DeriveCheck(keyspace.CheckInput{Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments: map[string]any{"seat": "12A"}, Names: []string{"seat"}, Secret: s})
	if err != nil {
		t.Fatal(err)
	}
	if want := keyspace.Check("c2:b3121d69540f1397:75b3cc0b676513f2a1d05ce8b47725c961ecfec52c7713cc4b43487317499f30"); c != want {
		t.Errorf("keyed check = %s, want %s", c, want)
	}
}

// A fingerprint tells two secrets of one generation apart — bytes that
// differ by a trailing newline included — is the same for the same bytes,
// and is pinned: a change of its derivation would make every worker
// refuse the generations the stores recorded.
func TestSecretFingerprint(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, keyspace.MinSecretLength)
	a, same := mustSecret(t, 1, 0x5a), mustSecret(t, 1, 0x5a)
	newline, err := keyspace.NewSecret(1, append(append([]byte(nil), key...), '\n'))
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != same.Fingerprint() {
		t.Errorf("one secret's bytes, two fingerprints: %s, %s", a.Fingerprint(), same.Fingerprint())
	}
	if a.Fingerprint() == newline.Fingerprint() {
		t.Errorf("a trailing newline left the fingerprint %s", a.Fingerprint())
	}
	if got, want := a.Fingerprint(), "f1:b66244254ae8abcc170cee843591e95b494b58aedec13e929f7f6947b9ce7f0f"; got != want {
		t.Errorf("Fingerprint() = %s, want %s", got, want)
	}
}
