package interceptor

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor/metricname"
	"github.com/tesserix/idempotency/keyspace"
	"github.com/tesserix/idempotency/store"
)

// A workflow records only the generation of the secret its keys are
// derived under (wire.KeySecretChangeID). Two workers that hold different bytes
// under one generation — a secret file that gained a trailing newline on
// one of them — would derive different keys for one call, and both would
// run it. So each tenant's store binds a generation to the bytes its keys
// were first derived under: a record under the key secretRecordKey(gen),
// completed with the secret's fingerprint ([keyspace.Secret.Fingerprint])
// and kept for store.MaxRetention. A worker derives keys under a secret
// only once it has found that record naming its bytes, or written it; a
// worker whose bytes the record does not name refuses the call
// (retryable, misconfigured) and never derives a key from them.
//
// It costs one store call per tenant and generation in the life of a
// worker process (the answer is kept), and a second for the tenant's first
// call under a generation. A store that does not answer ends the call not
// run, as a claim does.

// secretRecordPrefix opens the key of a tenant's record of a generation's
// fingerprint: no derived key has it (they open with keyspace.Version or
// keyspace.KeyedVersion).
const secretRecordPrefix = "kf1:"

// secretRecordActivity is the activity type the fingerprint records carry
// as their origin, so a listing tells what they are.
const secretRecordActivity = "idempotency.key-secret"

// secretRecordKey is the key of the record of generation gen's fingerprint.
func secretRecordKey(gen int) string { return secretRecordPrefix + strconv.Itoa(gen) }

// secretBinding is what boundSecrets is keyed by.
type secretBinding struct {
	tenant string
	gen    int
}

// bindSecret returns nil when tenant's record of s's generation names s's
// bytes (writing the record when the tenant has none), or the error the
// call ends with: not run when the store cannot say, misconfigured when
// the record names other bytes.
func (x *execution) bindSecret(ctx context.Context, tenant string, s *keyspace.Secret) error {
	b := secretBinding{tenant, s.Generation()}
	if _, ok := x.root.boundSecrets.Load(b); ok {
		return nil
	}
	retry := x.storeRetry(ctx)
	fp := fingerprints{opts: x.opts, info: x.info, heartbeat: x.heartbeat}
	for {
		stored, err := fp.fingerprint(ctx, tenant, s)
		switch {
		case err == nil && stored == s.Fingerprint():
			x.root.boundSecrets.Store(b, struct{}{})
			return nil
		case err == nil, errors.As(err, new(*errSecretRecord)):
			cause := fmt.Errorf("idempotency: this worker's secret of generation %d is not the one tenant %q's keys of that generation are derived under "+
				"(its fingerprint %s, the store's %s): give every worker of the task queue the same bytes (a trailing newline counts), "+
				"or number other bytes as a new generation; nothing was run under these bytes",
				s.Generation(), tenant, s.Fingerprint(), stored)
			if err != nil {
				cause = fmt.Errorf("idempotency: keys of tenant %q under the secret of generation %d are not derived: %w", tenant, s.Generation(), err)
			}
			x.rep.endEvent(ctx, EventMisconfigured, metricname.Misconfigured, cause)
			return temporal.NewApplicationError(fmt.Sprintf("idempotency: activity %q was not run: %v", x.decl.Name(), cause),
				decision.ErrorTypeUnknownKeySecret)
		case errors.Is(err, store.ErrInvalid), !retry.again(ctx, err):
			return x.storeFailed(ctx, fmt.Errorf("reading the fingerprint of the key secret of generation %d: %w", s.Generation(), err))
		}
	}
}

// fingerprints reads and writes tenants' records of key secrets'
// fingerprints, for the call described by info.
type fingerprints struct {
	opts      *Options
	info      sdkactivity.Info
	heartbeat func(context.Context) // while it waits for another writer
}

// fingerprint returns the fingerprint tenant's record of s's generation
// names, writing s's when the tenant has none: one claim when the record
// stands, a claim and a completion when it does not.
func (f fingerprints) fingerprint(ctx context.Context, tenant string, s *keyspace.Secret) (string, error) {
	key := secretRecordKey(s.Generation())
	var supersede int64
	for {
		cctx, cancel := context.WithTimeout(ctx, f.opts.StoreTimeout)
		res, err := f.opts.Store.Claim(cctx, store.ClaimParams{
			Tenant: tenant, Key: key, Holder: holderName(f.info, f.opts.Identity), Lease: f.opts.Lease,
			Supersede: supersede, Retention: store.MaxRetention,
			Origin: store.Origin{WorkflowID: f.info.WorkflowExecution.ID, RunID: f.info.WorkflowExecution.RunID,
				ActivityType: secretRecordActivity, ActivityID: f.info.ActivityID, Attempt: f.info.Attempt},
		})
		cancel()
		if err != nil {
			return "", err
		}
		switch res.Status {
		case store.StatusCompleted:
			return decodeFingerprint(res.Record.Outcome)
		case store.StatusAcquired:
			outcome, err := encodeFingerprint(s.Fingerprint())
			if err != nil {
				return "", err
			}
			cctx, cancel := context.WithTimeout(ctx, f.opts.StoreTimeout)
			err = f.opts.Store.Complete(cctx, store.CompleteParams{Tenant: tenant, Key: key, Token: res.Record.Token, Outcome: outcome})
			cancel()
			if err != nil {
				// Landed or not, the next pass reads the record: completed,
				// or held by this claim until its lease runs out.
				return "", err
			}
			return s.Fingerprint(), nil
		case store.StatusHeld:
			if res.LeaseExpired {
				// A worker died writing it: nothing was derived under
				// its bytes yet (it derives only once the record is
				// complete).
				supersede = res.Record.Token
				continue
			}
			supersede = 0
			wctx, cancel := context.WithTimeout(ctx, min(f.opts.WaitHeartbeat, f.opts.StoreTimeout))
			_, err := f.opts.Store.Wait(wctx, store.WaitParams{Tenant: tenant, Key: key, Token: res.Record.Token})
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return "", err
			}
			f.heartbeat(ctx)
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
		default:
			// Indeterminate (a person marked or decided it), or unknown:
			// nobody can say which bytes the generation is.
			return "", &errSecretRecord{fmt.Sprintf("the record of the key secret's fingerprint (tenant %s, key %s) is %s, not completed: "+
				"delete that one record from the store for the next worker to write it again", tenant, key, res.Record.State)}
		}
	}
}

// encodeFingerprint is a fingerprint as a record's outcome: a payload, as
// every recorded outcome is, left unencoded (a fingerprint reveals
// nothing, and every worker must read it, whatever its codec).
func encodeFingerprint(fp string) ([]byte, error) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(fp)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(p)
}

// decodeFingerprint reads what encodeFingerprint wrote.
func decodeFingerprint(outcome []byte) (string, error) {
	var (
		fp string
		p  commonpb.Payloads
	)
	err := proto.Unmarshal(outcome, &p)
	if err == nil {
		err = converter.GetDefaultDataConverter().FromPayloads(&p, &fp)
	}
	if err != nil || fp == "" {
		return "", &errSecretRecord{fmt.Sprintf("the record of the key secret's fingerprint holds no fingerprint (%v)", err)}
	}
	return fp, nil
}

// errSecretRecord is a fingerprint record nobody can read a fingerprint
// from: the call is refused as misconfigured until an operator forgets it.
type errSecretRecord struct{ reason string }

func (e *errSecretRecord) Error() string { return e.reason }
