package interceptor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/idempotency/store"
)

// transactionalHolder begins the holder of a claim that keeps a record
// clean: one on which nothing outside a transaction can have applied an
// effect since the key was last free. Only a transactional execution
// (activity.Policy.Transactional) claims under it, and only when the record
// it claims is clean: a free key, or a takeover of a holder that itself
// begins with it (claimHolder). A transactional execution that takes over
// any other holder — an attempt made outside a transaction, by a worker of
// an earlier rollout or release, or an execution that took such a holder
// over to mark it — claims under its plain name, so the record stays
// unclean through every takeover, undone takeover (whose record names the
// taker) and mark that does not land, until a person decides or the key is
// freed. A gone holder of a clean record left nothing behind, and its key
// may run the body again; any other is marked indeterminate. Holders of
// other claims begin with a hexadecimal execution ID (holderName), never
// with this.
const transactionalHolder = "tx:"

// isTransactionalHolder reports whether a record held by holder is clean:
// see transactionalHolder.
func isTransactionalHolder(holder string) bool {
	return strings.HasPrefix(holder, transactionalHolder)
}

// claimHolder is the holder the next claim of a call is made under: with
// lost set, a takeover of that record. A transactional call claims as a
// transactional holder only a record that stays clean by its claim.
func (id identity) claimHolder(transactional bool, lost *store.Record) string {
	if !transactional || (lost != nil && !isTransactionalHolder(lost.Holder)) {
		return id.holder
	}
	return transactionalHolder + id.holder
}

// holderName identifies an execution attempt in a record:
// "<execution digest>:<attempt>:<worker identity>". The digest stands for
// the workflow ID, run ID and activity ID, which may hold any character,
// whether the activity is local, and a standalone activity's run ID.
func holderName(info sdkactivity.Info, identity string) string {
	return executionID(info) + ":" + strconv.FormatInt(int64(info.Attempt), 10) + ":" + identity
}

func executionID(info sdkactivity.Info) string {
	h := sha256.New()
	if info.IsLocalActivity {
		// Local activities number their IDs apart from regular ones, so the
		// same ID may name one of each in a run. Regular activities keep
		// the digest they always had, so holders written by older workers
		// are still recognised.
		h.Write([]byte("local\x00"))
	}
	fields := []string{info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID}
	if standalone(info) {
		// Runs of one standalone activity ID share its key; the holder
		// tells them apart.
		fields = append(fields, info.ActivityRunID)
	}
	for _, s := range fields {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// EncodeOutcome encodes value as the dispatcher records an outcome: the
// payloads dc makes of it, in protobuf wire form. Use it, with the worker's
// data converter, to record a person's decision on an indeterminate key
// through store.Resolve, so the duplicates that follow receive value.
func EncodeOutcome(dc converter.DataConverter, value any) ([]byte, error) {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	p, err := dc.ToPayloads(value)
	if err != nil {
		return nil, fmt.Errorf("idempotency: encoding an outcome: %w", err)
	}
	return proto.Marshal(p)
}

// DecodeOutcome decodes a recorded outcome into valuePtr with dc, the
// inverse of [EncodeOutcome]. An empty outcome (an activity that returns
// only an error) leaves valuePtr unchanged.
func DecodeOutcome(dc converter.DataConverter, outcome []byte, valuePtr any) error {
	if len(outcome) == 0 {
		return nil
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var p commonpb.Payloads
	if err := proto.Unmarshal(outcome, &p); err != nil {
		return fmt.Errorf("idempotency: decoding an outcome: %w", err)
	}
	return dc.FromPayloads(&p, valuePtr)
}
