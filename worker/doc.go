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
package worker
