package interceptor

import (
	"context"
	"fmt"
	"strconv"

	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/keyspace"
)

// KeySecretChangeID is the workflow.GetVersion change ID under which a
// workflow records, at its first activity call, the generation of the
// secret its calls' keys are derived under (Options.KeySecret): the
// version is the generation itself (1 to keyspace.MaxSecretGeneration).
// Each call it schedules then carries the generation in the
// [KeySecretHeader] header, and the dispatcher derives the call's key and
// check under the secret of that generation (Options.KeySecret or one of
// Options.KeySecrets).
//
// A workflow that made its first call without a secret records nothing
// (workflow.DefaultVersion on replay) and its keys stay unkeyed for its
// life, whatever the configuration later says; one keyed under a
// generation stays under it, also on a worker whose KeySecret is another.
// Only a version marker is written, which every release replays (the SDK
// skips version markers the code does not ask for).
const KeySecretChangeID = "idempotency.key-secret"

// KeySecretHeader is the header in which a workflow's calls carry the
// generation of the secret their keys are derived under (see
// [KeySecretChangeID]), as an integer.
const KeySecretHeader = "idempotency-key-secret"

// secretsByGeneration indexes the configured secrets by generation,
// refusing a nil one and two of one generation.
func secretsByGeneration(current *keyspace.Secret, others []*keyspace.Secret) (map[int]*keyspace.Secret, error) {
	m := make(map[int]*keyspace.Secret, len(others)+1)
	if current != nil {
		m[current.Generation()] = current
	}
	for i, s := range others {
		field := "KeySecrets[" + strconv.Itoa(i) + "]"
		if s == nil {
			return nil, optionsError(field, "is nil")
		}
		if prev, ok := m[s.Generation()]; ok && prev != s {
			return nil, optionsError(field, fmt.Sprintf("generation %d is held by another secret already (KeySecret or an earlier KeySecrets entry); number every secret apart", s.Generation()))
		}
		m[s.Generation()] = s
	}
	return m, nil
}

// markKeySecret writes, into the header of a call the workflow schedules,
// the generation of the secret its key is derived under, asking the
// history once which one this workflow was keyed under.
func (o *workflowOutbound) markKeySecret(ctx workflow.Context) {
	if !o.secretKnown {
		o.secretKnown = true
		switch cur := o.root.opts.KeySecret; {
		case o.Next.IsReplaying(ctx):
			// The history says, whatever this worker's KeySecret: a
			// marker of any generation (a later one included, written
			// by a worker a rotation reached first), or none. Replay
			// writes no command, so the bound is only GetVersion's
			// check.
			if v := o.Next.GetVersion(ctx, KeySecretChangeID, workflow.DefaultVersion, keyspace.MaxSecretGeneration); v >= 1 {
				o.secretGen = int(v)
			}
		case cur != nil:
			o.secretGen = int(o.Next.GetVersion(ctx, KeySecretChangeID, workflow.DefaultVersion, workflow.Version(cur.Generation())))
		}
	}
	if o.secretGen < 1 {
		return
	}
	h := sdkinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return
	}
	if p, err := converter.GetDefaultDataConverter().ToPayload(o.secretGen); err == nil {
		h[KeySecretHeader] = p
	}
}

// keySecret returns the secret the [KeySecretHeader] header of an
// activity's context asks its key to be derived under: nil when it has
// none. A generation this worker does not hold fails the call, retryably:
// a worker that holds it (or this one, once deployed with it) runs it.
func (x *execution) keySecret(ctx context.Context) (*keyspace.Secret, error) {
	p, ok := sdkinterceptor.Header(ctx)[KeySecretHeader]
	if !ok {
		return nil, nil
	}
	var gen int
	if err := converter.GetDefaultDataConverter().FromPayload(p, &gen); err != nil || gen < 1 {
		return nil, x.notDeduplicable(ctx, activity.ReasonKeyNotDerivable, fmt.Errorf("idempotency: the %s header does not hold a secret's generation (%v)", KeySecretHeader, err))
	}
	if s := x.root.secrets[gen]; s != nil {
		return s, nil
	}
	cause := fmt.Errorf("idempotency: the workflow's keys are derived under the secret of generation %d, which this worker does not hold: "+
		"give it in interceptor.Options.KeySecrets (or KeySecret) of every worker of the task queue", gen)
	x.count(MetricMisconfigured)
	x.observe(ctx, EventMisconfigured, cause)
	return nil, temporal.NewApplicationError(fmt.Sprintf("idempotency: activity %q was not run: %v", x.decl.Name(), cause),
		decision.ErrorTypeUnknownKeySecret)
}
