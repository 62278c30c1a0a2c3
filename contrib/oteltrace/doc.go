// Package oteltrace adds what the idempotency dispatcher did with an
// activity execution to the activity's OpenTelemetry span: the key's digest
// (never the arguments), whether the call claimed the key, was answered
// from a record, waited for another caller and for how long, ended
// indeterminate and why, or was settled by a probe. It is a module of its
// own, so the library does not make OpenTelemetry a dependency of users
// who do not trace.
//
// Put the SDK's tracing interceptor before the idempotency interceptor, so
// the activity's span is current in the context the dispatcher reports
// with, and give the dispatcher the observer:
//
//	tracing, _ := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{})
//	ic, _ := interceptor.New(interceptor.Options{
//		Store:    st,
//		Observer: oteltrace.New(nil), // or oteltrace.New(yourObserver), which it calls after
//	})
//	w := worker.New(c, queue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{tracing, ic}})
//
// # What a span gets
//
// Attributes, set on the span when the dispatcher reports (the last report
// wins where one repeats):
//
//	idempotency.activity   the activity type
//	idempotency.kind       IDEMPOTENT or EFFECTFUL
//	idempotency.key        the idempotency key: a SHA-256 digest, never the arguments
//	idempotency.outcome    claimed, deduplicated, waited, taken_over, completed, released,
//	                       indeterminate, arguments_mismatch, probe_landed, probe_not_landed,
//	                       probe_unsettled, probe_late, superseded, orphaned, misconfigured
//	idempotency.reason     why an outcome is (or would have been) indeterminate
//	idempotency.waited_ms  how long the call waited for another caller, in all
//
// and one span event per report, named "idempotency." and the event's name
// ([interceptor.EventKind.String]), with the same attributes where they
// apply, and idempotency.duration_ms for a claim or a wait. An error's
// message is never added: a downstream's message may quote the arguments.
// A span that is not recording gets nothing and costs one check.
package oteltrace
