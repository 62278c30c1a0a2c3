package interceptor

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
)

// The library's errors in Temporal's categories: the three documented as
// benign (decision's error-type block) are, and the errors that may fail a
// workflow or ask someone to act are not.
func TestErrorCategories(t *testing.T) {
	book := func(context.Context, string) (string, error) { return "", nil }
	x := &execution{decl: activity.MustDeclare(book, activity.Policy{Kind: activity.KindIdempotent, OncePerRun: true})}
	category := func(err error) (string, temporal.ApplicationErrorCategory) {
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) {
			t.Fatalf("%v is not an ApplicationError", err)
		}
		return ae.Type(), ae.Category()
	}
	for _, err := range []error{
		supersededError(x.decl.Name(), errors.New("taken over")),
		notLanded("Book", activity.ReasonBodyFailed, errors.New("gateway timeout")),
		rejection(errors.New("no such key")),
	} {
		if typ, c := category(err); c != temporal.ApplicationErrorCategoryBenign {
			t.Errorf("%s: category %v, want benign", typ, c)
		}
	}
	if typ, _ := category(rejection(errors.New("x"))); typ != decision.ErrorTypeRejected {
		t.Errorf("rejection has type %s", typ)
	}
	var ae *temporal.ApplicationError
	if errors.As(rejection(errors.New("x")), &ae) && !ae.NonRetryable() {
		t.Error("a rejection became retryable")
	}
	for _, err := range []error{
		activity.NewIndeterminateError(activity.IndeterminateOutcome{Activity: "Book", Tenant: "acme", Key: "v1:k", Reason: activity.ReasonBodyFailed}, nil),
		activity.NewNotRunError(activity.NotRun{Activity: "Book", Tenant: "acme", Key: "v1:k"}, nil),
		commitUnsettled(x.decl.Name(), x.identity, errors.New("lost")),
	} {
		if typ, c := category(err); c == temporal.ApplicationErrorCategoryBenign {
			t.Errorf("%s is benign: it may fail a workflow or ask an operator to act", typ)
		}
	}
}
