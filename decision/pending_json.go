package decision

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tesserix/idempotency/activity"
)

// MarshalJSON writes the entry with the outcome's token as a JSON string:
// it is a 64-bit integer, which JSON readers that hold numbers as doubles
// (JavaScript, jq, the temporal CLI's output) would round, and an operator
// copies it from there. The error details the dispatcher sends keep the
// number; only the query's answer changes.
func (p PendingDecision) MarshalJSON() ([]byte, error) {
	type plain PendingDecision
	return json.Marshal(struct {
		plain
		Outcome outcomeWithStringToken `json:"outcome"`
	}{plain(p), outcomeWithStringToken{IndeterminateOutcome: p.Outcome, Token: tokenString(p.Outcome.Token)}})
}

// UnmarshalJSON reads the entry with the token as a string (this release)
// or as a number (earlier ones).
func (p *PendingDecision) UnmarshalJSON(b []byte) error {
	type plain PendingDecision
	w := struct {
		*plain
		Outcome *outcomeWithStringToken `json:"outcome"`
	}{plain: (*plain)(p)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Outcome == nil {
		return nil
	}
	p.Outcome = w.Outcome.IndeterminateOutcome
	if w.Outcome.Token == "" {
		p.Outcome.Token = 0
		return nil
	}
	t, err := strconv.ParseInt(string(w.Outcome.Token), 10, 64)
	if err != nil {
		return fmt.Errorf("idempotency: the token %q is not a 64-bit integer: %w", w.Outcome.Token, err)
	}
	p.Outcome.Token = t
	return nil
}

// outcomeWithStringToken is an IndeterminateOutcome whose token is written
// as a string; its Token shadows the embedded one.
type outcomeWithStringToken struct {
	activity.IndeterminateOutcome
	Token wireToken `json:"token,omitempty"`
}

// wireToken is a token's decimal digits, written as a JSON string and read
// from a string or a number.
type wireToken string

// UnmarshalJSON takes "123" or 123.
func (w *wireToken) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*w = wireToken(s)
		return nil
	}
	*w = wireToken(b)
	return nil
}

// tokenString is t as the string the token is written as; empty for none
// (omitted).
func tokenString(t int64) wireToken {
	if t == 0 {
		return ""
	}
	return wireToken(strconv.FormatInt(t, 10))
}
