package interceptor

import (
	"context"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/decision"
)

// DefaultPendingSearchAttribute is the search attribute name the
// documentation uses for Options.PendingSearchAttribute.
const DefaultPendingSearchAttribute = "IdempotencyPendingKeys"

// OperatorClient is the part of client.Client that
// [Interceptor.CheckSearchAttribute] uses.
type OperatorClient interface {
	OperatorService() operatorservice.OperatorServiceClient
}

// SearchAttributeError says that a namespace lacks
// Options.PendingSearchAttribute, and how to create it.
type SearchAttributeError struct {
	// Namespace is the namespace asked; empty when it was the client's
	// own, asked through the client (worker.Worker.Start).
	Namespace string
	Name      string
	// Reason is "missing", or the type the attribute has instead of
	// KeywordList.
	Reason string
}

// Error implements error.
func (e *SearchAttributeError) Error() string {
	if e.Namespace == "" {
		// Asked through a client, which names no namespace: the client's.
		return fmt.Sprintf("idempotency: the client's namespace has no KeywordList search attribute %q (%s): waiting workflows cannot set it; "+
			"create it with: temporal operator search-attribute create --name %s --type KeywordList (and --namespace NAME for a namespace other than default), "+
			"or leave PendingSearchAttribute empty", e.Name, e.Reason, e.Name)
	}
	return fmt.Sprintf("idempotency: namespace %q has no KeywordList search attribute %q (%s): waiting workflows will not set it; "+
		"create it with: temporal operator search-attribute create --namespace %s --name %s --type KeywordList",
		e.Namespace, e.Name, e.Reason, e.Namespace, e.Name)
}

// CheckSearchAttribute asks the namespace whether it has
// Options.PendingSearchAttribute as a KeywordList. When it does not, the
// interceptor stops setting it (workflows still wait, query and update as
// before) and a *SearchAttributeError says how to create it: log it once.
// A workflow that upserts an attribute its namespace lacks has its tasks
// failed by the server, so call this before the worker starts. Without a
// configured attribute it does nothing.
func (i *Interceptor) CheckSearchAttribute(ctx context.Context, c OperatorClient, namespace string) error {
	name := i.opts.PendingSearchAttribute
	if name == "" {
		return nil
	}
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		i.noSearchAttribute.Store(true)
		return fmt.Errorf("idempotency: listing the search attributes of namespace %q: %w", namespace, err)
	}
	t, ok := resp.GetCustomAttributes()[name]
	switch {
	case !ok:
		i.noSearchAttribute.Store(true)
		return &SearchAttributeError{Namespace: namespace, Name: name, Reason: "missing"}
	case t != enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		i.noSearchAttribute.Store(true)
		return &SearchAttributeError{Namespace: namespace, Name: name, Reason: "type " + t.String()}
	}
	i.noSearchAttribute.Store(false)
	return nil
}

// searchAttribute is the attribute new waits set, if any.
func (i *Interceptor) searchAttribute() string {
	if i.noSearchAttribute.Load() {
		return ""
	}
	return i.opts.PendingSearchAttribute
}

// searchAttributeBudget bounds, in bytes of the keys it lists, the value
// publish sets the search attribute to: the server refuses a value larger
// than its per-value limit (2 KiB by default) and terminates the workflow
// whose task upserted it, which at about 30 open waits it did.
const searchAttributeBudget = 1024

// attributeValue is what the search attribute lists for the open keys: all
// of them while they fit searchAttributeBudget, else as many as fit, in
// order, and a last entry "+N more (query idempotency.pending)" — the
// attribute stays set, so the list query finds the workflow, and its
// pending query lists every key.
func attributeValue(open []string) []string {
	size := 0
	for i, k := range open {
		if size+len(k) > searchAttributeBudget {
			return append(slices.Clone(open[:i]), fmt.Sprintf("+%d more (query %s)", len(open)-i, decision.QueryName))
		}
		size += len(k)
	}
	return open
}

// publish shows the workflow's open waits where Temporal users look: the
// current details, and the search attribute recorded for this run. It
// upserts the attribute whenever the open keys change, as it always did,
// whatever part of them the attribute lists (see attributeValue), so the
// history holds the same upserts on every release.
func (o *workflowOutbound) publish(ctx workflow.Context) {
	open := o.openKeys()
	o.showDetails(ctx, open)
	if o.searchAttribute == "" || slices.Equal(open, o.published) {
		return
	}
	key := temporal.NewSearchAttributeKeyKeywordList(o.searchAttribute)
	upd := key.ValueSet(attributeValue(open))
	if len(open) == 0 {
		upd = key.ValueUnset()
	}
	if err := o.Next.UpsertTypedSearchAttributes(ctx, upd); err != nil {
		o.Next.GetLogger(ctx).Warn("idempotency: cannot set the pending search attribute", "name", o.searchAttribute, "error", err)
		return
	}
	o.published = open
}

// openKeys lists, sorted, the keys waiting for a decision.
func (o *workflowOutbound) openKeys() []string {
	var keys []string
	// Map order differs between runs, and is sorted away below: workflowcheck
	// cannot see that.
	//workflowcheck:ignore
	for k, w := range o.waits {
		if w.decision == nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// validSearchAttributeName reports whether name is empty or a name
// Temporal accepts for a custom search attribute.
func validSearchAttributeName(name string) bool {
	for i, r := range name {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return len(name) <= 255
}
