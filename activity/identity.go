package activity

import (
	"github.com/tesserix/idempotency/keyspace"
)

// The identity of one execution: its key and the digest of its checked
// arguments, derived from one reading of the call's arguments.

// Key derives the idempotency key of one execution from its tenant, its run
// and its decoded arguments (without the context), as the dispatcher does.
// It returns an error matching keyspace.ErrMissingArgument when a named key
// argument is absent, and the keyspace package's other errors as they are.
func (d *Declaration) Key(tenant, run string, args []any) (keyspace.Key, error) {
	return d.KeyUnder(nil, tenant, run, args)
}

// KeyUnder is [Declaration.Key] derived under secret (keyspace.Input.Secret),
// as the dispatcher derives the keys of a workflow keyed under it; a nil
// secret derives what Key does.
func (d *Declaration) KeyUnder(secret *keyspace.Secret, tenant, run string, args []any) (keyspace.Key, error) {
	return d.deriveKey(secret, tenant, run, args, d.arguments(args, d.policy.KeyArguments))
}

// Identity derives the two things that name one execution under secret
// (nil: unkeyed), as the dispatcher derives them: its idempotency key, as
// [Declaration.KeyUnder] does, and the digest of its checked arguments, as
// [Declaration.CheckUnder] does ("" when the declaration checks none). The
// arguments are read once for both. An error is the key's, or else the
// check's.
func (d *Declaration) Identity(secret *keyspace.Secret, tenant, run string, args []any) (keyspace.Key, keyspace.Check, error) {
	keyed, checked := d.identityArguments(args)
	key, err := d.deriveKey(secret, tenant, run, args, keyed)
	if err != nil {
		return "", "", err
	}
	check, err := d.deriveCheck(secret, tenant, run, checked)
	if err != nil {
		return "", "", err
	}
	return key, check, nil
}

// deriveKey derives the key from args and keyed, what arguments makes of
// them for the key's names.
func (d *Declaration) deriveKey(secret *keyspace.Secret, tenant, run string, args []any, keyed any) (keyspace.Key, error) {
	in := keyspace.Input{Tenant: tenant, Run: run, Activity: d.name, KeyArguments: d.policy.KeyArguments, Secret: secret}
	if d.policy.KeyAllArguments {
		if args == nil {
			args = []any{}
		}
		in.KeyArguments = []string{allArguments}
		in.Arguments = map[string]any{allArguments: args}
		return keyspace.Derive(in)
	}
	if d.argIndex == nil && len(args) == 0 && len(in.KeyArguments) > 0 {
		return "", &keyspace.MissingArgumentError{Name: in.KeyArguments[0]}
	}
	in.Arguments = keyed
	return keyspace.Derive(in)
}

// allArguments is the one name under which a KeyAllArguments declaration
// keys the list of its arguments.
const allArguments = "arguments"

// Check derives the digest of the declared checked arguments of one
// execution, as the dispatcher does; "" when the declaration checks none.
// A checked argument the call does not carry is digested as absent.
func (d *Declaration) Check(tenant, run string, args []any) (keyspace.Check, error) {
	return d.CheckUnder(nil, tenant, run, args)
}

// CheckUnder is [Declaration.Check] derived under secret
// (keyspace.CheckInput.Secret); a nil secret derives what Check does.
func (d *Declaration) CheckUnder(secret *keyspace.Secret, tenant, run string, args []any) (keyspace.Check, error) {
	if len(d.policy.CheckArguments) == 0 {
		return "", nil
	}
	return d.deriveCheck(secret, tenant, run, d.arguments(args, d.policy.CheckArguments))
}

// deriveCheck derives the check from checked, what arguments makes of the
// call's arguments for the checked names; "" when none are checked.
func (d *Declaration) deriveCheck(secret *keyspace.Secret, tenant, run string, checked any) (keyspace.Check, error) {
	if len(d.policy.CheckArguments) == 0 {
		return "", nil
	}
	return keyspace.DeriveCheck(keyspace.CheckInput{Tenant: tenant, Run: run, Activity: d.name,
		Arguments: checked, Names: d.policy.CheckArguments, Secret: secret})
}

// identityArguments is what arguments returns for the key's names and
// for the checked ones, made together: the one struct argument serves
// both. keyed is nil for a declaration that keys all its arguments, which
// deriveKey reads from args itself.
func (d *Declaration) identityArguments(args []any) (keyed, checked any) {
	if d.argIndex == nil {
		if len(args) > 0 {
			return args[0], args[0]
		}
		var none any = map[string]any{}
		return none, none
	}
	pick := func(names []string) any {
		m := make(map[string]any, len(names))
		for _, k := range names {
			if i, ok := d.argIndex[k]; ok && i < len(args) {
				m[k] = args[i]
			}
		}
		return m
	}
	if !d.policy.KeyAllArguments {
		keyed = pick(d.policy.KeyArguments)
	}
	return keyed, pick(d.policy.CheckArguments)
}

// arguments returns what the keyspace reads names from: the one struct
// argument, or a map of the named positional arguments.
func (d *Declaration) arguments(args []any, names []string) any {
	if d.argIndex == nil {
		if len(args) > 0 {
			return args[0]
		}
		return map[string]any{}
	}
	m := make(map[string]any, len(names))
	for _, k := range names {
		if i, ok := d.argIndex[k]; ok && i < len(args) {
			m[k] = args[i]
		}
	}
	return m
}
