package store

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Validate reports the first malformed field of p as an [*InvalidError].
// Stores call it before touching their backend.
func (p ClaimParams) Validate() error {
	if err := validateScope(p.Tenant, p.Key); err != nil {
		return err
	}
	if p.Holder == "" {
		return &InvalidError{Field: "Holder", Reason: "must not be empty"}
	}
	if len(p.Holder) > MaxHolderLength {
		return &InvalidError{Field: "Holder", Reason: "longer than " + strconv.Itoa(MaxHolderLength) + " bytes"}
	}
	if err := validateText("Holder", p.Holder); err != nil {
		return err
	}
	if err := validateLease(p.Lease); err != nil {
		return err
	}
	if p.Supersede < 0 {
		return &InvalidError{Field: "Supersede", Reason: "must not be negative"}
	}
	if err := validateKept(p.Check, p.Retention); err != nil {
		return err
	}
	return p.Origin.validate()
}

// validateKept checks the check digest and the retention a record keeps.
func validateKept(check string, retention time.Duration) error {
	if len(check) > MaxCheckLength {
		return &InvalidError{Field: "Check", Reason: "longer than " + strconv.Itoa(MaxCheckLength) + " bytes"}
	}
	if err := validateText("Check", check); err != nil {
		return err
	}
	switch {
	case retention < 0:
		return &InvalidError{Field: "Retention", Reason: "must not be negative"}
	case retention > MaxRetention:
		return &InvalidError{Field: "Retention", Reason: "longer than MaxRetention (100 years)"}
	}
	return nil
}

func (o Origin) validate() error {
	for _, f := range []struct{ name, v string }{
		{"Origin.WorkflowID", o.WorkflowID}, {"Origin.RunID", o.RunID},
		{"Origin.ActivityType", o.ActivityType}, {"Origin.ActivityID", o.ActivityID},
	} {
		if len(f.v) > MaxOriginLength {
			return &InvalidError{Field: f.name, Reason: "longer than " + strconv.Itoa(MaxOriginLength) + " bytes"}
		}
		if err := validateText(f.name, f.v); err != nil {
			return err
		}
	}
	if o.Attempt < 0 {
		return &InvalidError{Field: "Origin.Attempt", Reason: "must not be negative"}
	}
	return nil
}

// Validate reports the first malformed field of p as an [*InvalidError].
func (p RenewParams) Validate() error {
	if err := validateFence(p.Tenant, p.Key, p.Token); err != nil {
		return err
	}
	return validateLease(p.Lease)
}

// Validate reports the first malformed field of p as an [*InvalidError].
func (p CompleteParams) Validate() error { return validateFence(p.Tenant, p.Key, p.Token) }

// Validate reports the first malformed field of p as an [*InvalidError].
func (p ReleaseParams) Validate() error { return validateFence(p.Tenant, p.Key, p.Token) }

// Validate reports the first malformed field of p as an [*InvalidError].
func (p MarkIndeterminateParams) Validate() error {
	return validateFence(p.Tenant, p.Key, p.Token)
}

// Validate reports the first malformed field of p as an [*InvalidError].
func (p LookupParams) Validate() error { return validateScope(p.Tenant, p.Key) }

// Validate reports the first malformed field of p as an [*InvalidError].
func (p WaitParams) Validate() error { return validateFence(p.Tenant, p.Key, p.Token) }

// Validate reports the first malformed field of p as an [*InvalidError].
func (p ResolveParams) Validate() error {
	if err := validateScope(p.Tenant, p.Key); err != nil {
		return err
	}
	switch p.Decision {
	case ActionComplete, ActionFree:
	default:
		return &InvalidError{Field: "Decision", Reason: "unknown decision " + strconv.Itoa(int(p.Decision))}
	}
	if p.Token < 0 {
		return &InvalidError{Field: "Token", Reason: "must not be negative"}
	}
	if p.RecordIfGone && p.Decision != ActionComplete {
		return &InvalidError{Field: "RecordIfGone", Reason: "only records an outcome, with DecisionComplete"}
	}
	if p.Stale && p.Token == 0 {
		return &InvalidError{Field: "Stale", Reason: "needs Token: the record the person looked at"}
	}
	if err := validateKept(p.Check, p.Retention); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"By", p.By}, {"Reason", p.Reason}, {"Reference", p.Reference}} {
		if len(f.v) > MaxResolutionTextLength {
			return &InvalidError{Field: f.name, Reason: "longer than " + strconv.Itoa(MaxResolutionTextLength) + " bytes"}
		}
		if err := validateText(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports the first malformed field of p as an [*InvalidError].
func (p ForgetParams) Validate() error { return validateTenant(p.Tenant) }

// Validate reports the first malformed field of p as an [*InvalidError].
func (p SweepParams) Validate() error {
	if p.Limit < 0 {
		return &InvalidError{Field: "Limit", Reason: "must not be negative"}
	}
	return nil
}

// EffectiveLimit returns p.Limit, or DefaultSweepLimit when it is zero.
func (p SweepParams) EffectiveLimit() int {
	if p.Limit == 0 {
		return DefaultSweepLimit
	}
	return p.Limit
}

// ValidateTenant reports, as an [*InvalidError], why every store would
// refuse tenant: it is empty, longer than [MaxTenantLength] bytes, not valid
// UTF-8, or holds a NUL byte. Callers check a tenant with it before deriving
// keys under it, so a tenant that can never be stored fails at once.
func ValidateTenant(tenant string) error { return validateTenant(tenant) }

func validateTenant(tenant string) error {
	switch {
	case tenant == "":
		return &InvalidError{Field: "Tenant", Reason: "must not be empty"}
	case len(tenant) > MaxTenantLength:
		return &InvalidError{Field: "Tenant", Reason: "longer than " + strconv.Itoa(MaxTenantLength) + " bytes"}
	}
	return validateText("Tenant", tenant)
}

func validateScope(tenant, key string) error {
	if err := validateTenant(tenant); err != nil {
		return err
	}
	switch {
	case key == "":
		return &InvalidError{Field: "Key", Reason: "must not be empty"}
	case len(key) > MaxKeyLength:
		return &InvalidError{Field: "Key", Reason: "longer than " + strconv.Itoa(MaxKeyLength) + " bytes"}
	}
	return validateText("Key", key)
}

func validateFence(tenant, key string, token int64) error {
	if err := validateScope(tenant, key); err != nil {
		return err
	}
	if token <= 0 {
		return &InvalidError{Field: "Token", Reason: "must be positive"}
	}
	return nil
}

func validateLease(lease time.Duration) error {
	if lease <= 0 {
		return &InvalidError{Field: "Lease", Reason: "must be positive"}
	}
	return nil
}

// validateText refuses what no backend can store faithfully: invalid UTF-8,
// and the NUL byte, which PostgreSQL's text type cannot hold.
func validateText(field, s string) error {
	if !utf8.ValidString(s) {
		return &InvalidError{Field: field, Reason: "not valid UTF-8"}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return &InvalidError{Field: field, Reason: "contains a NUL byte"}
	}
	return nil
}
