// Package worker is the wiring: the library as one Temporal SDK plugin, a
// one-call worker built on it, activities registered together with their
// policies, and zap or log/slog (PluginOptions.Logger, PluginOptions.Slog)
// as the sink for both the SDK's logs and the library's events.
//
// # The plugin
//
// [NewPlugin] returns a [Plugin] that a client and its workers take in their
// options, as Temporal installs integrations:
//
//	p, err := worker.NewPlugin(worker.PluginOptions{
//		Idempotency:  interceptor.Options{Store: st},
//		Declarations: []*activity.Declaration{Book, LookupFare},
//		Logger:       logger,
//	})
//	c, err := client.Dial(client.Options{HostPort: addr, Plugins: []client.Plugin{p}})
//	w := sdkworker.New(c, "bookings", sdkworker.Options{}) // takes the plugin from the client
//	w.RegisterWorkflow(BookTrip)
//	err = w.Run(sdkworker.InterruptCh())
//
// On the client it adds the tenant propagator and hands the client's data
// converter to the dispatcher (see Payload codecs). On every worker built
// on the client (or given the plugin in sdkworker.Options.Plugins) it
// installs a dispatcher of the worker's own — the activity and workflow
// interceptor — with the declarations applied, registers the declared
// activities and the decision.ResolveActivityName and
// decision.ProbeActivityName (and decision.ProbeOnScheduleActivityName)
// activities when the worker starts (each
// unless the worker registered that name itself), runs the
// sweeper while the worker runs, and ends the dispatcher's background work
// once the worker has stopped. When a worker starts it refuses to, with an
// error that says why, if the store does not answer or the namespace lacks
// interceptor.Options.PendingSearchAttribute (asked through the client whose
// options carry the plugin, or the client [New] was given); a worker whose
// sdkworker.Options.WorkerStopTimeout is zero gets
// [DefaultWorkerStopTimeout], so stopping it (a deploy) lets running
// declared bodies finish. [NexusOperation] builds a declared Nexus handler
// on the plugin's dispatchers. A workflow replayer given the plugin gets
// the propagator and the workflow side. [ClientPlugin] is the client part
// alone, for a client that only starts workflows or activities.
//
// The plugin implements client.Plugin and sdkworker.Plugin directly rather
// than being a temporal.SimplePlugin: a simple plugin cannot read the
// converter a client ends up with (its NewClient only passes through), and
// runs its stop callback before the worker has stopped, while the
// dispatcher's background work must outlast the activities still finishing.
//
// # The short path
//
//	c, err := worker.Dial(client.Options{HostPort: addr}, logger) // the plugin's client part
//	w, err := worker.New(c, "bookings", worker.Options{
//		Idempotency: interceptor.Options{Store: st},
//		Logger:      logger,
//	})
//	err = w.Register(Book, LookupFare) // *activity.Declaration values
//	err = w.Run(sdkworker.InterruptCh())
//
// [New] is the SDK's worker.New with a [Plugin] in the worker's options, so
// both paths share one wiring. A worker gets one dispatcher: [New] on a
// client that carries a [Plugin], or a second plugin on one worker, is
// refused with [ErrInstalledTwice].
//
// Activities registered through the embedded SDK worker without a
// declaration behave exactly as without this library.
//
// # Payload codecs
//
// A declared activity's result reaches Temporal's history encoded by the
// client's data converter and codecs, as any activity's does, however the
// client was built. A client that carries the plugin — [NewPlugin] or
// [ClientPlugin] in its options, or built with [Dial] or [ClientOptions] —
// also hands its converter to the dispatcher of every worker built on it,
// so the outcomes recorded in the store go through the same codecs (an
// encrypting codec encrypts them at rest too) with nothing else to
// configure: an activity's, and a Nexus operation's declared with
// interceptor.NexusOperation. On a client built without it, set the dispatcher's
// interceptor.Options.DataConverter to the client's converter, or the store
// keeps results as the SDK's default converter makes them, in the clear.
package worker
