package activity

// Kind says what repeating an activity would do.
//
//	Kind            What it means                              Retried on failure  Deduplicated
//	KindReadOnly    Reads, changes nothing                     yes                 no
//	KindIdempotent  Writes, but repeating lands the same state yes                 yes
//	KindEffectful   Repeating it is a second effect            no                  yes
type Kind uint8

// The kinds an activity can declare.
const (
	// KindReadOnly: the activity reads and changes nothing. Nothing is
	// claimed or recorded; the retry policy applies as usual.
	KindReadOnly Kind = iota + 1
	// KindIdempotent: the activity writes, but repeating it lands the same
	// state. Duplicates get the recorded answer; a failure frees the key and
	// the retry policy applies.
	KindIdempotent
	// KindEffectful: repeating the activity is a second effect. Duplicates
	// get the recorded answer; a failure keeps the claim, marks it
	// indeterminate and stops the run instead of retrying.
	KindEffectful
)

// String returns the kind's name as the specification spells it:
// READ_ONLY, IDEMPOTENT or EFFECTFUL.
func (k Kind) String() string {
	switch k {
	case KindReadOnly:
		return "READ_ONLY"
	case KindIdempotent:
		return "IDEMPOTENT"
	case KindEffectful:
		return "EFFECTFUL"
	default:
		return "UNKNOWN"
	}
}

// Valid reports whether k is one of the declared kinds.
func (k Kind) Valid() bool { return k >= KindReadOnly && k <= KindEffectful }

// Retried reports whether a failed execution is retried under the
// activity's retry policy.
func (k Kind) Retried() bool { return k == KindReadOnly || k == KindIdempotent }

// Deduplicated reports whether executions are claimed under an idempotency
// key so that duplicates get the recorded answer.
func (k Kind) Deduplicated() bool { return k == KindIdempotent || k == KindEffectful }
