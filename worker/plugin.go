package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/decision"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// Version is this module's release, as CHANGELOG.md numbers it. Between
// releases it is the next one with "-dev": the code of CHANGELOG.md's
// Unreleased section, newer than every published release (0.2.0 is the
// latest). Publishing drops the suffix and names the section.
const Version = "0.3.0-dev"

// PluginName is the name the plugin gives the SDK (client.Plugin.Name,
// sdkworker.Plugin.Name), reported in the worker's heartbeats.
const PluginName = "tesserix.idempotency"

// PluginOptions configure [NewPlugin].
type PluginOptions struct {
	// Idempotency configure the dispatcher of every worker the plugin
	// configures; Idempotency.Store is required. Leave
	// Idempotency.DataConverter nil when the plugin is in the client's
	// options: recorded outcomes then go through the client's own converter
	// and codecs. Idempotency.Identity defaults to each worker's
	// sdkworker.Options.Identity, then to hostname@pid.
	Idempotency interceptor.Options
	// Declarations are applied to every worker the plugin configures, and
	// their activities registered on it under their names when the worker
	// starts — except a name the worker has registered already, which keeps
	// its registration and takes the declaration's policy. Two declarations
	// under one name are refused.
	Declarations []*activity.Declaration
	// Logger receives the library's events (as worker.Options.Logger does)
	// and, on a client without a logger of its own, the SDK's logs. Without
	// it (or Slog) the events go to the logger the worker already has
	// ([SDKLogObserver]: the SDK's logger of each activity, which is the
	// client's).
	Logger *zap.Logger
	// Slog is Logger for a worker that logs with log/slog: it receives the
	// library's events ([SlogObserver]: the same messages, fields and
	// levels), the sweeper's warnings and, on a client without a logger of
	// its own, the SDK's logs (log.NewStructuredLogger). Set at most one of
	// Logger and Slog. A worker whose SDK logger is its own (any
	// log.Logger) needs neither: the events reach it without them.
	Slog *slog.Logger
	// MetricsHandler receives the backlog gauges of every worker the plugin
	// configures; see Options.MetricsHandler. Defaults to the
	// MetricsHandler of the client the plugin is installed on (the first,
	// if several), so a client that exports metrics exports the gauges too.
	MetricsHandler client.MetricsHandler
	// SweepInterval is how often every running worker the plugin configures
	// deletes the store's expired records; see Options.SweepInterval.
	// Defaults to 10 minutes ([DefaultSweepInterval]); negative turns
	// sweeping off.
	SweepInterval time.Duration
}

// Plugin installs the library on a Temporal client and the workers built on
// it, through the SDK's plugin API: give it to client.Options.Plugins (every
// worker built on the client takes it from there) or to
// sdkworker.Options.Plugins. It is a client.Plugin and an sdkworker.Plugin.
//
// On the client it adds the tenant propagator (once) and hands the client's
// data converter to the dispatcher, so recorded outcomes go through the
// client's codecs. On each worker it installs a dispatcher of its own (the
// activity and workflow interceptor) with the declarations applied,
// registers the declared activities and the [decision.ResolveActivityName]
// and [decision.ProbeActivityName] (and [decision.ProbeOnScheduleActivityName])
// activities when the worker starts (each unless the worker has a
// registration under that name already), runs the sweeper while the worker
// runs, and stops the dispatcher's background work once the worker has
// stopped. On a workflow replayer it adds the propagator and the workflow
// interceptor, so a replay sees what the worker saw.
//
// The propagator and the converter live on the client: a plugin given only
// to a worker's options installs the dispatcher, the declarations and the
// Resolve activity, but the worker's client must then carry the tenant
// propagator itself ([ClientPlugin], [Dial] and [ClientOptions] add it,
// with the converter hand-off). One plugin in both the client's and the worker's
// options configures the worker once; a second dispatcher on one worker
// (another plugin, [New] on a client that carries one, or an
// interceptor.Interceptor in sdkworker.Options.Interceptors) is refused with
// [ErrInstalledTwice].
type Plugin struct {
	//lint:ignore U1000 every method is overridden, but the SDK requires the embedding
	clientPluginBase
	workerPluginBase

	// cfg is nil for the client part alone (ClientPlugin).
	cfg *pluginConfig

	mu      sync.Mutex
	workers map[string]*pluginWorker // by the SDK's worker instance key
	// noSearchAttribute is set once CheckSearchAttribute found the
	// namespace without the attribute: dispatchers built afterwards set none.
	noSearchAttribute bool
	// clientMetrics is the MetricsHandler of the first client the plugin
	// configured: the backlog gauges' handler when PluginOptions names none.
	clientMetrics client.MetricsHandler
	// checked is set once CheckSearchAttribute was called: its answer
	// stands, and workers do not ask again when they start.
	checked bool
	// count is how New's client asks its namespace (see checkOnStart).
	count workflowCounter
	// clients are the clients whose options carry the plugin.
	clients           []*clientRef
	warnUncheckedOnce sync.Once
}

// Both SDK plugin bases are named PluginBase; aliases let one type embed
// them both.
type (
	//lint:ignore U1000 see Plugin
	clientPluginBase = client.PluginBase
	workerPluginBase = sdkworker.PluginBase
)

var (
	_ client.Plugin    = (*Plugin)(nil)
	_ sdkworker.Plugin = (*Plugin)(nil)
)

type pluginConfig struct {
	iopts      interceptor.Options // Observer includes the zap observer
	decls      []*activity.Declaration
	logger     log.Logger // the sweeper's warnings: Logger's or Slog's, or none
	sdkLogs    bool       // bridge the SDK's logs of a client without a logger to logger
	metrics    client.MetricsHandler
	sweepEvery time.Duration
}

// pluginWorker is what the plugin keeps for one worker it configured.
type pluginWorker struct {
	ic         *interceptor.Interceptor
	queue      string          // the worker's task queue
	registered map[string]bool // activity names the worker registered
	started    bool
	stopSweep  func()
}

// ErrInstalledTwice is returned (by [New]) or panicked with (by the SDK's
// worker.New, which turns a plugin's error into a panic) when a worker
// would get a second idempotency dispatcher: two claims per call, and the
// Resolve activity registered twice.
var ErrInstalledTwice = errors.New("idempotency: the library is installed on this worker twice")

// NewPlugin validates opts and returns the plugin. Errors name the option
// as the caller spelt it ("worker.PluginOptions.Idempotency.Lease": a
// [*store.OptionsError] matching [store.ErrInvalidOptions]), or the
// declaration.
func NewPlugin(opts PluginOptions) (*Plugin, error) {
	if opts.SweepInterval > 0 && opts.SweepInterval < MinSweepInterval {
		return nil, &store.OptionsError{Field: "worker.PluginOptions.SweepInterval",
			Reason: fmt.Sprintf("%v is below the minimum of %v (zero means the default, negative turns sweeping off)", opts.SweepInterval, MinSweepInterval)}
	}
	var logger log.Logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	events := SDKLogObserver(nil) // the worker's own logger, when none is given
	switch {
	case opts.Logger != nil && opts.Slog != nil:
		return nil, &store.OptionsError{Field: "worker.PluginOptions.Slog",
			Reason: "is set beside Logger: set one, the logger the worker logs with"}
	case opts.Logger != nil:
		logger, events = NewLogger(opts.Logger), ZapObserver(opts.Logger)
	case opts.Slog != nil:
		logger, events = log.NewStructuredLogger(opts.Slog), SlogObserver(opts.Slog)
	}
	iopts := opts.Idempotency
	iopts.Observer = Observers(events, iopts.Observer)
	// Validated once here, so a worker is never refused later for them.
	probe, err := interceptor.New(iopts)
	if err != nil {
		return nil, renameOption(err, "interceptor.Options.", "worker.PluginOptions.Idempotency.")
	}
	defer probe.Stop()
	if err := probe.Declare(opts.Declarations...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	sweepEvery := cmp.Or(opts.SweepInterval, DefaultSweepInterval)
	return &Plugin{
		cfg: &pluginConfig{
			iopts:      iopts,
			decls:      slices.Clone(opts.Declarations),
			logger:     logger,
			sdkLogs:    opts.Logger != nil || opts.Slog != nil,
			metrics:    opts.MetricsHandler,
			sweepEvery: sweepEvery,
		},
		workers: map[string]*pluginWorker{},
	}, nil
}

// ClientPlugin returns the plugin's client part alone: the tenant
// propagator and the hand-off of the client's data converter to the
// dispatchers of the client's workers, with no store and nothing installed
// on the workers. Give it to a client that only starts workflows and
// activities (a starter), or whose workers install the library with [New].
// [ClientOptions] adds it.
func ClientPlugin() *Plugin { return &Plugin{workers: map[string]*pluginWorker{}} }

// Name implements client.Plugin and sdkworker.Plugin: [PluginName].
func (*Plugin) Name() string { return PluginName }

// ConfigureClient implements client.Plugin: it adds the tenant propagator
// unless the client has it, the interceptor that hands the client's
// converter to the dispatchers of the client's workers, and, when the
// client has no logger and the plugin has one, the SDK's logger bridged to
// it. A plugin made by [NewPlugin] also notes the client's connection (see
// clientRef), through which its workers make the start check [New]'s make.
func (p *Plugin) ConfigureClient(_ context.Context, o client.PluginConfigureClientOptions) error {
	opts := o.ClientOptions
	if !slices.ContainsFunc(opts.ContextPropagators, isTenantPropagator) {
		opts.ContextPropagators = append(slices.Clone(opts.ContextPropagators), interceptor.TenantPropagator())
	}
	if !slices.ContainsFunc(opts.Interceptors, isConverterCarrier) {
		// One per client: NewClient binds it to this client's converter.
		opts.Interceptors = append(slices.Clone(opts.Interceptors), &converterCarrier{})
	}
	if p.cfg != nil && !slices.ContainsFunc(opts.Interceptors, p.isOwnRef) {
		// How the start check finds this client (see clientRef).
		r := p.newClientRef()
		opts.Interceptors = append(slices.Clone(opts.Interceptors), r)
		opts.ConnectionOptions.DialOptions = append(slices.Clone(opts.ConnectionOptions.DialOptions), grpc.WithChainUnaryInterceptor(r.capture))
	}
	if opts.Logger == nil && p.cfg != nil && p.cfg.sdkLogs {
		opts.Logger = p.cfg.logger
	}
	if opts.MetricsHandler != nil && p.cfg != nil {
		p.mu.Lock()
		if p.clientMetrics == nil {
			p.clientMetrics = opts.MetricsHandler
		}
		p.mu.Unlock()
	}
	return nil
}

// NewClient implements client.Plugin: it binds the client's converter
// carrier to the converter the client ends up with, after every plugin
// configured it, and notes the client's namespace for the start check.
func (p *Plugin) NewClient(
	ctx context.Context,
	o client.PluginNewClientOptions,
	next func(context.Context, client.PluginNewClientOptions) error,
) error {
	for _, i := range o.ClientOptions.Interceptors {
		if c, ok := i.(*converterCarrier); ok {
			c.bind(o.ClientOptions.DataConverter)
		}
	}
	p.bindClientRefs(o)
	return next(ctx, o)
}

// DefaultWorkerStopTimeout is the sdkworker.Options.WorkerStopTimeout the
// plugin (and so [New]) gives a worker whose options leave it zero: how
// long Stop waits for the activities still running before the SDK abandons
// them. The SDK's own zero abandons them at once, so every rolling deploy
// (SIGTERM, then Stop) cut declared bodies off half-way and left their keys
// to a person. A declaration carries no timeout (the workflow sets it per
// call), so this is a stated default rather than one derived from the
// bodies: a minute, longer than most calls to a payment or booking API.
// Any value the worker's options set is kept; give the process's shutdown
// grace period (Kubernetes' terminationGracePeriodSeconds, 30 s by default)
// a little more than the stop timeout, or the process is killed first.
const DefaultWorkerStopTimeout = time.Minute

// ConfigureWorker implements sdkworker.Plugin: it installs a dispatcher for
// the worker, with the declarations applied, notes what the worker
// registers, and sets WorkerStopTimeout to [DefaultWorkerStopTimeout] where
// the worker's options leave it zero (and logs that it did). The SDK's
// worker.New panics with the error it returns.
func (p *Plugin) ConfigureWorker(_ context.Context, o sdkworker.PluginConfigureWorkerOptions) error {
	if p.cfg == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.workers[o.WorkerInstanceKey]; ok {
		return nil // the same plugin in the client's and the worker's options
	}
	wopts := o.WorkerOptions
	if slices.ContainsFunc(wopts.Interceptors, isDispatcher) {
		return fmt.Errorf("%w: the worker for task queue %q has an idempotency dispatcher already (another plugin, worker.New on a client that carries the plugin, or an interceptor.Interceptor in its Interceptors): install the library once",
			ErrInstalledTwice, o.TaskQueue)
	}
	if wopts.WorkerStopTimeout == 0 {
		// The SDK's zero abandons a running body on Stop: on every rolling
		// deploy a charge cut off half-way leaves its key to a person.
		wopts.WorkerStopTimeout = DefaultWorkerStopTimeout
		p.cfg.logger.Info("idempotency: WorkerStopTimeout was not set; the worker waits up to the library's default for running activities when it stops",
			"task_queue", o.TaskQueue, "worker_stop_timeout", DefaultWorkerStopTimeout)
	}
	iopts := p.cfg.iopts
	if iopts.Identity == "" {
		iopts.Identity = wopts.Identity
	}
	if p.noSearchAttribute {
		iopts.PendingSearchAttribute = ""
	}
	ic, err := interceptor.New(iopts)
	if err != nil {
		return err
	}
	if err := ic.Declare(p.cfg.decls...); err != nil {
		ic.Stop()
		return err
	}
	wopts.Interceptors = append(slices.Clone(wopts.Interceptors), ic)
	pw := &pluginWorker{ic: ic, queue: o.TaskQueue, registered: map[string]bool{}}
	reg := o.WorkerRegistryOptions
	prev := reg.OnRegisterActivity
	reg.OnRegisterActivity = func(a any, ro sdkactivity.RegisterOptions) {
		names := activityNames(a, ro)
		p.mu.Lock()
		for _, n := range names {
			pw.registered[n] = true
		}
		p.mu.Unlock()
		if prev != nil {
			prev(a, ro)
		}
	}
	p.workers[o.WorkerInstanceKey] = pw
	return nil
}

// StartWorker implements sdkworker.Plugin: it refuses to start a worker
// whose store does not answer, or whose namespace lacks the
// PendingSearchAttribute option's attribute (the
// *interceptor.SearchAttributeError says how to create it; see
// checkOnStart for the client it asks through), registers the declared
// activities and the Resolve activity the worker has not registered
// itself, and starts the sweeper.
func (p *Plugin) StartWorker(
	ctx context.Context,
	o sdkworker.PluginStartWorkerOptions,
	next func(context.Context, sdkworker.PluginStartWorkerOptions) error,
) error {
	p.mu.Lock()
	pw := p.workers[o.WorkerInstanceKey]
	first := pw != nil && !pw.started
	if first {
		pw.started = true
	}
	p.mu.Unlock()
	if !first {
		return next(ctx, o)
	}
	if err := pingStore(ctx, pw.ic.Store()); err != nil {
		p.mu.Lock()
		pw.started = false
		p.mu.Unlock()
		return err
	}
	if err := p.checkOnStart(ctx); err != nil {
		p.mu.Lock()
		pw.started = false
		p.mu.Unlock()
		return err
	}
	if err := p.register(pw, o.WorkerRegistry); err != nil {
		return err
	}
	stop := p.startSweeper(pw.ic.Store())
	p.mu.Lock()
	pw.stopSweep = stop
	p.mu.Unlock()
	if err := next(ctx, o); err != nil {
		p.stopSweeper(pw)
		return err
	}
	return nil
}

// registry is what StartWorker registers activities through.
type registry interface {
	RegisterActivityWithOptions(any, sdkactivity.RegisterOptions)
}

func (p *Plugin) register(pw *pluginWorker, r registry) error {
	type reg struct {
		fn   any
		name string
	}
	// Registered whether or not AwaitDecision is on: workflows routed while
	// it was on still apply their decisions through it after it is turned
	// off, and would wait forever without it.
	// The probe activity likewise: a waiting workflow asks the probes of
	// the activities this worker declares through it.
	regs := []reg{
		{pw.ic.ResolveActivity(), decision.ResolveActivityName},
		{pw.ic.ProbeActivity(), decision.ProbeActivityName},
		{pw.ic.ProbeOnScheduleActivity(), decision.ProbeOnScheduleActivityName},
	}
	for _, d := range p.cfg.decls {
		regs = append(regs, reg{d.Func(), d.Name()})
	}
	for _, g := range regs {
		p.mu.Lock()
		taken := pw.registered[g.name]
		p.mu.Unlock()
		if taken {
			continue
		}
		if err := registerActivity(r, g.fn, g.name); err != nil {
			return err
		}
	}
	return nil
}

// StopWorker implements sdkworker.Plugin: it stops the sweeper, lets the
// worker stop, then ends the dispatcher's background work (see
// interceptor.Interceptor.Stop), which must outlast the activities still
// running while the worker stops.
func (p *Plugin) StopWorker(
	ctx context.Context,
	o sdkworker.PluginStopWorkerOptions,
	next func(context.Context, sdkworker.PluginStopWorkerOptions),
) {
	p.mu.Lock()
	pw := p.workers[o.WorkerInstanceKey]
	p.mu.Unlock()
	if pw == nil {
		next(ctx, o)
		return
	}
	p.stopSweeper(pw)
	next(ctx, o)
	pw.ic.Stop()
	p.mu.Lock()
	delete(p.workers, o.WorkerInstanceKey)
	p.mu.Unlock()
}

// ConfigureWorkflowReplayer implements sdkworker.Plugin: a replayer gets
// the tenant propagator and a dispatcher, as a worker does, unless it has
// them.
func (p *Plugin) ConfigureWorkflowReplayer(_ context.Context, o sdkworker.PluginConfigureWorkflowReplayerOptions) error {
	if p.cfg == nil {
		return nil
	}
	ro := o.WorkflowReplayerOptions
	if !slices.ContainsFunc(ro.ContextPropagators, isTenantPropagator) {
		ro.ContextPropagators = append(slices.Clone(ro.ContextPropagators), interceptor.TenantPropagator())
	}
	if !slices.ContainsFunc(ro.Interceptors, isDispatcher) {
		ic, err := interceptor.New(p.cfg.iopts)
		if err != nil {
			return err
		}
		if err := ic.Declare(p.cfg.decls...); err != nil {
			return err
		}
		// A replayer runs no activity: the dispatcher starts no background
		// work to stop.
		ro.Interceptors = append(slices.Clone(ro.Interceptors), ic)
	}
	return nil
}

// CheckSearchAttribute asks the namespace whether it has the
// PendingSearchAttribute option's attribute, as
// interceptor.Interceptor.CheckSearchAttribute does, for the dispatchers of
// every worker the plugin configured and will configure: where it is
// missing they set none, and the returned error says how to create it. Call
// it with the client before the workers start. Its answer stands: workers
// started afterwards do not ask again, so a worker whose namespace lacks the
// attribute starts and waits without it, where otherwise its start would be
// refused.
func (p *Plugin) CheckSearchAttribute(ctx context.Context, c interceptor.OperatorClient, namespace string) error {
	if p.cfg == nil {
		return nil
	}
	probe, err := interceptor.New(p.cfg.iopts)
	if err != nil {
		return err
	}
	defer probe.Stop()
	err = probe.CheckSearchAttribute(ctx, c, namespace)
	p.mu.Lock()
	p.checked = true
	p.noSearchAttribute = err != nil
	live := make([]*interceptor.Interceptor, 0, len(p.workers))
	for _, pw := range p.workers {
		live = append(live, pw.ic)
	}
	p.mu.Unlock()
	for _, ic := range live {
		// Each dispatcher keeps its own answer: give it the same one.
		_ = ic.CheckSearchAttribute(ctx, c, namespace)
	}
	return err
}

// interceptorFor returns the dispatcher the plugin installed on the one
// worker it configured; New uses it.
func (p *Plugin) interceptorFor() *interceptor.Interceptor {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pw := range p.workers {
		return pw.ic
	}
	return nil
}

func isDispatcher(i sdkinterceptor.WorkerInterceptor) bool {
	_, ok := i.(*interceptor.Interceptor)
	return ok
}

// activityNames returns the activity type names a registration of a with
// ro makes, as the SDK names them: ro.Name for a function registered under
// a name, the function's name otherwise, and ro.Name followed by each
// exported method's name for a pointer to a struct.
func activityNames(a any, ro sdkactivity.RegisterOptions) []string {
	v := reflect.ValueOf(a)
	switch {
	case v.Kind() == reflect.Func && ro.Name != "":
		return []string{ro.Name}
	case v.Kind() == reflect.Func:
		return []string{activity.FunctionName(a)}
	case v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct:
		names := make([]string, 0, v.NumMethod())
		for i := range v.NumMethod() {
			names = append(names, ro.Name+v.Type().Method(i).Name)
		}
		return names
	case ro.Name != "":
		return []string{ro.Name}
	}
	return nil
}

func (p *Plugin) isOwnRef(i sdkinterceptor.ClientInterceptor) bool {
	r, ok := i.(*clientRef)
	return ok && r.owner == p
}
