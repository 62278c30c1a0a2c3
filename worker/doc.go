// Package worker is the one-call wiring: a Temporal worker with the
// idempotency interceptor installed, activities registered together with
// their policies, and zap as the sink for both the SDK's logs and the
// library's events.
//
//	c, err := worker.Dial(client.Options{HostPort: addr}, logger) // adds the tenant propagator
//	w, err := worker.New(c, "bookings", worker.Options{
//		Idempotency: interceptor.Options{Store: st},
//		Logger:      logger,
//	})
//	err = w.Register(Book, LookupFare) // *activity.Declaration values
//	err = w.Run(sdkworker.InterruptCh())
//
// Activities registered through the embedded SDK worker without a
// declaration behave exactly as without this library.
//
// # Payload codecs
//
// A declared activity's result reaches Temporal's history encoded by the
// client's data converter and codecs, as any activity's does, however the
// client was built. [Dial] and [ClientOptions] also install a client plugin
// that hands the client's converter to the dispatcher of every worker built
// on that client, so the outcomes it records in the store go through the
// same codecs (an encrypting codec encrypts them at rest too) with nothing
// else to configure. On a client built without them, set
// Options.Idempotency.DataConverter to the client's converter, or the store
// keeps results as the SDK's default converter makes them, in the clear.
package worker
