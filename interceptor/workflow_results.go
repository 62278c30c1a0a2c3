package interceptor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
)

// declaredResults answers, from the activity declarations this worker
// holds, what the result of a complete decision must be: its type, an
// example of it, whether a decision's result decodes into it, and a
// decision template for the current details. What it reads may differ
// between deployments, so only what the history does not keep asks it (the
// pending query, the update's validator, the current details) or a
// SideEffect whose verdict the history keeps (recordedVerdict).
type declaredResults struct{ root *Interceptor }

// example is the zero value of the declared result type of
// activityType as JSON — the shape of a complete decision's result — or
// nil when this worker does not hold the declaration or the activity
// returns no result. Only queries, the validator and the current details
// (none of them in the history) read it.
//
//workflowcheck:ignore
func (r declaredResults) example(activityType string) json.RawMessage {
	out := r.typeOf(activityType)
	if out == nil {
		return nil
	}
	b, err := json.Marshal(reflect.Zero(out).Interface())
	if err != nil {
		return nil
	}
	return b
}

// typeOf is the declared result type of activityType, or nil when
// this worker does not hold the declaration or the activity returns only
// an error.
//
//workflowcheck:ignore
func (r declaredResults) typeOf(activityType string) reflect.Type {
	if decl, ok := r.root.Declaration(activityType); ok {
		if ft := reflect.TypeOf(decl.Func()); ft != nil && ft.Kind() == reflect.Func && ft.NumOut() == 2 {
			return ft.Out(0)
		}
	}
	return nil
}

// check reports whether raw is an explicit result that decodes into
// the declared return type of the activity, when this worker holds its
// declaration. What it answers depends on the worker's declarations: only
// the validator reads it, or a verdict recorded in the history.
//
// workflowcheck flags it for reading the declarations (reflection, and
// encoding/json): that is the part that may differ between deployments,
// and why it runs only in the update's validator (never replayed) or in a
// SideEffect whose verdict the history keeps (recordedVerdict).
//
//workflowcheck:ignore
func (r declaredResults) check(activityType string, raw json.RawMessage) error {
	var out reflect.Type
	known := false
	if decl, ok := r.root.Declaration(activityType); ok {
		if ft := reflect.TypeOf(decl.Func()); ft != nil && ft.Kind() == reflect.Func {
			known = true
			if ft.NumOut() == 2 {
				out = ft.Out(0)
			}
		}
	}
	if known && out == nil {
		if len(raw) > 0 {
			return fmt.Errorf("idempotency: activity %s returns no result; complete takes none", activityType)
		}
		return nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("idempotency: complete needs a result: what activity %s returned, as JSON", activityType)
	}
	if !known {
		if !json.Valid(raw) {
			return errors.New("idempotency: the result is not JSON")
		}
		return nil
	}
	if err := strictJSON(raw, reflect.New(out).Interface()); err != nil {
		example := ""
		if b, merr := json.Marshal(reflect.Zero(out).Interface()); merr == nil {
			example = fmt.Sprintf(" (its shape: %s)", b)
		}
		return fmt.Errorf("idempotency: the result does not decode into %s, what activity %s returns%s: %w", out, activityType, example, err)
	}
	return nil
}

// template is a decision on the outcome's key, as the Update takes it, with
// an example result of the activity's declared type (see example):
// valid JSON, to be pasted and filled in. Without the declaration on this
// worker it carries no result, and is refused until one is added. It
// reads the declarations and encodes JSON, which workflowcheck flags: the
// current details are not in the history, so what they say may differ
// between deployments.
//
//workflowcheck:ignore
func (r declaredResults) template(p activity.IndeterminateOutcome) string {
	t := struct {
		Key    string          `json:"key"`
		Action decision.Action `json:"action"`
		Result json.RawMessage `json:"result,omitempty"`
		By     string          `json:"by"`
		Reason string          `json:"reason"`
	}{Key: p.Key, Action: decision.ActionComplete, Result: r.example(p.Activity),
		By: "you@example.com", Reason: "confirmed with the downstream"}
	b, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	return string(b)
}
