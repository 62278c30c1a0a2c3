package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/store"
)

// Options configure [New].
type Options struct {
	// Worker are the Temporal worker's own options. The idempotency
	// interceptor is appended to Worker.Interceptors.
	Worker sdkworker.Options
	// Idempotency configure the dispatcher; Idempotency.Store is required.
	// Its defaults are interceptor.Options'.
	// Leave Idempotency.DataConverter nil on a client built with [Dial] or
	// [ClientOptions] (or with [ClientPlugin] in its options): recorded
	// outcomes then go through the client's own converter and codecs. On a client built otherwise, set it to the
	// client's converter, or the store keeps results as the SDK's default
	// converter makes them (in the clear). Temporal's history always gets
	// the client's encoding. When Observer is nil, events are logged
	// through Logger; when it is set, they go to both.
	Idempotency interceptor.Options
	// Logger receives the library's events. Without it (or Slog) they go
	// to the logger the worker already has ([SDKLogObserver]).
	Logger *zap.Logger
	// Slog is Logger for a worker that logs with log/slog: the library's
	// events ([SlogObserver]) and the sweeper's warnings go to it. Set at
	// most one of Logger and Slog.
	Slog *slog.Logger
	// MetricsHandler, when set, receives the backlog gauges on the
	// sweeper's schedule (idempotency_backlog_indeterminate and
	// idempotency_backlog_stale, tagged by activity type, never by key or
	// tenant): give it the client's MetricsHandler. With sweeping off
	// (negative SweepInterval) no gauge is reported.
	MetricsHandler client.MetricsHandler
	// SweepInterval is how often the running worker deletes the store's
	// expired records (store.Sweep), so they do not pile up; every replica
	// may sweep, in bounded batches. Negative turns sweeping off, for a
	// deployment that sweeps elsewhere. Defaults to 10 minutes
	// ([DefaultSweepInterval]).
	SweepInterval time.Duration
}

// renameOption returns err with the field of its *store.OptionsError
// renamed from the prefix from to the prefix to, so that a refusal names
// the option as the caller spelt it; any other error unchanged.
func renameOption(err error, from, to string) error {
	var oe *store.OptionsError
	if errors.As(err, &oe) && strings.HasPrefix(oe.Field, from) {
		return &store.OptionsError{Field: to + strings.TrimPrefix(oe.Field, from), Reason: oe.Reason}
	}
	return err
}

// DefaultSweepInterval is Options.SweepInterval's default.
const DefaultSweepInterval = 10 * time.Minute

// MinSweepInterval is the smallest positive Options.SweepInterval that
// [New] accepts: below it the sweeper would spin against the store.
const MinSweepInterval = 10 * time.Millisecond

// Worker is a Temporal worker with the idempotency interceptor installed.
// The embedded worker's methods work as usual; an activity registered
// through them, with no declaration, behaves exactly as without this library.
// Start and Run also start the sweeper; Stop stops it, the Temporal
// worker, and then the interceptor's background work (see
// interceptor.Interceptor.Stop).
type Worker struct {
	sdkworker.Worker
	interceptor *interceptor.Interceptor
}

// New creates a Temporal worker for taskQueue on c with the idempotency
// interceptor installed: the SDK's worker.New with a [Plugin] made of opts
// in its options. The client must carry the tenant propagator (see
// [ClientOptions]) for the default tenant resolution to find a tenant. A
// client that carries a [Plugin] already installs the library on every
// worker built on it: build those with the SDK's worker.New; New refuses
// them with [ErrInstalledTwice].
func New(c client.Client, taskQueue string, opts Options) (*Worker, error) {
	if c == nil {
		return nil, &store.OptionsError{Field: "worker.New client", Reason: "is required"}
	}
	iopts := opts.Idempotency
	iopts.Identity = cmp.Or(iopts.Identity, opts.Worker.Identity)
	p, err := NewPlugin(PluginOptions{
		Idempotency:    iopts,
		Logger:         opts.Logger,
		Slog:           opts.Slog,
		MetricsHandler: opts.MetricsHandler,
		SweepInterval:  opts.SweepInterval,
	})
	if err != nil {
		return nil, renameOption(err, "worker.PluginOptions.", "worker.Options.")
	}
	p.noteClient(c)
	wopts := opts.Worker
	wopts.Plugins = append(slices.Clone(wopts.Plugins), p)
	sw, err := newSDKWorker(c, taskQueue, wopts)
	if err != nil {
		return nil, err
	}
	return &Worker{Worker: sw, interceptor: p.interceptorFor()}, nil
}

// Start starts the worker, as the SDK's Start does, after checking that
// the namespace has the search attribute Options.Idempotency's
// PendingSearchAttribute names: a waiting workflow that sets an attribute
// its namespace lacks has every task failed by the server, so a worker
// whose namespace lacks it does not start, and the
// *interceptor.SearchAttributeError says how to create it. Leave
// PendingSearchAttribute empty to run without one. The check is the
// plugin's (see [Plugin.StartWorker]): a worker built with the SDK's
// worker.New on a client that carries a [Plugin] makes it too.
func (w *Worker) Start() error { return w.Worker.Start() }

// Run is the SDK's Run, after the check Start makes.
func (w *Worker) Run(interruptCh <-chan any) error { return w.Worker.Run(interruptCh) }

// SearchAttributeCheckTimeout bounds the question a starting worker asks
// the namespace about the pending search attribute.
const SearchAttributeCheckTimeout = 10 * time.Second

// newSDKWorker is the SDK's worker.New, returning the error of a plugin of
// this package's that it would panic with.
func newSDKWorker(c client.Client, taskQueue string, opts sdkworker.Options) (w sdkworker.Worker, err error) {
	defer func() {
		if p := recover(); p != nil {
			perr, ok := p.(error)
			if !ok || !(errors.Is(perr, ErrInstalledTwice) || errors.Is(perr, interceptor.ErrInvalidOptions) || errors.Is(perr, interceptor.ErrAlreadyDeclared)) {
				panic(p)
			}
			err = perr
		}
	}()
	return sdkworker.New(c, taskQueue, opts), nil
}

// Interceptor returns the worker's idempotency interceptor.
func (w *Worker) Interceptor() *interceptor.Interceptor { return w.interceptor }

// ErrRegistration matches every error the Register methods return.
var ErrRegistration = errors.New("idempotency: registration refused")

// Register registers each declaration's activity under its name and applies
// its policy. Two declarations under one name, a name already declared, or a
// transactional declaration the store cannot run (an
// [*interceptor.TransactionalError]) are refused before anything is
// registered. An activity the SDK refuses
// (a name it already registered) stops the registration there: the
// activities before it stay registered with their policies, and the refused
// one and those after it are neither registered nor declared. A registered
// activity never runs without the policy it was declared with.
func (w *Worker) Register(decls ...*activity.Declaration) error {
	seen := make(map[string]bool, len(decls))
	for _, d := range decls {
		if d == nil {
			return fmt.Errorf("%w: nil declaration", ErrRegistration)
		}
		if _, ok := w.interceptor.Declaration(d.Name()); ok || seen[d.Name()] {
			return fmt.Errorf("%w: %w: %q", ErrRegistration, interceptor.ErrAlreadyDeclared, d.Name())
		}
		if err := w.interceptor.CheckTransactional(d); err != nil {
			return fmt.Errorf("%w: %w", ErrRegistration, err)
		}
		seen[d.Name()] = true
	}
	for _, d := range decls {
		if err := w.register(d); err != nil {
			return err
		}
	}
	return nil
}

// register declares d and registers its activity, or neither.
func (w *Worker) register(d *activity.Declaration) error {
	if err := w.interceptor.Declare(d); err != nil {
		return fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	if err := registerActivity(w.Worker, d.Func(), d.Name()); err != nil {
		w.interceptor.Undeclare(d.Name())
		return err
	}
	return nil
}

// RegisterActivities registers every exported method of the struct pointer
// a as an activity named prefix + method name, as the SDK's
// RegisterActivityWithOptions does, and applies policies[method name] to it.
// Every method must have an entry: the zero Policy leaves a method
// undeclared on purpose. An entry naming no method, a method with no entry,
// or a refused declaration fails the whole registration before anything is
// registered; an activity the SDK refuses is handled as [Worker.Register]
// does.
func (w *Worker) RegisterActivities(a any, prefix string, policies map[string]activity.Policy) error {
	v := reflect.ValueOf(a)
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%w: %T is not a pointer to a struct of activities", ErrRegistration, a)
	}
	t := v.Type()
	var (
		decls   []*activity.Declaration
		plain   []string
		missing []string
	)
	methods := make(map[string]bool, t.NumMethod())
	for i := range t.NumMethod() {
		m := t.Method(i)
		methods[m.Name] = true
		p, ok := policies[m.Name]
		if !ok {
			missing = append(missing, m.Name)
			continue
		}
		if p.Kind == 0 {
			if len(p.KeyArguments) > 0 || len(p.Params) > 0 || p.Probe != nil || p.Transactional || p.TransactionalDB != nil {
				return fmt.Errorf("%w: the policy of %s has no Kind, which leaves it undeclared, yet names key arguments, parameters, a probe or a transaction: give it a Kind", ErrRegistration, m.Name)
			}
			plain = append(plain, m.Name)
			continue
		}
		p.Name = prefix + m.Name
		d, err := activity.Declare(v.Method(i).Interface(), p)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRegistration, err)
		}
		decls = append(decls, d)
	}
	var unknown []string
	for name := range policies {
		if !methods[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("%w: policies for %s, which %T has no exported method of that name", ErrRegistration, strings.Join(unknown, ", "), a)
	case len(missing) > 0:
		return fmt.Errorf("%w: %T has methods %s with no policy (give the zero activity.Policy to leave one undeclared)", ErrRegistration, a, strings.Join(missing, ", "))
	}
	if err := w.Register(decls...); err != nil {
		return err
	}
	for _, name := range plain {
		if err := registerActivity(w.Worker, v.MethodByName(name).Interface(), prefix+name); err != nil {
			return err
		}
	}
	return nil
}

// registerActivity turns the SDK's panic on a bad or duplicate registration
// into an error.
func registerActivity(r registry, fn any, name string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: registering activity %q: %v", ErrRegistration, name, p)
		}
	}()
	r.RegisterActivityWithOptions(fn, sdkactivity.RegisterOptions{Name: name})
	return nil
}

// ClientOptions returns a copy of opts with the tenant propagator appended
// (once), [ClientPlugin] (once; see the package
// documentation: it hands the client's data converter to the dispatcher of
// every worker built on the client), and, when opts.Logger is nil and
// logger is not, the SDK's logger bridged to logger. Options that carry a
// [Plugin] already get no second one.
func ClientOptions(opts client.Options, logger *zap.Logger) client.Options {
	props := slices.Clone(opts.ContextPropagators)
	if !slices.ContainsFunc(props, isTenantPropagator) {
		props = append(props, interceptor.TenantPropagator())
	}
	opts.ContextPropagators = props
	if !slices.ContainsFunc(opts.Plugins, isPlugin) {
		opts.Plugins = append(slices.Clone(opts.Plugins), ClientPlugin())
	}
	if opts.Logger == nil && logger != nil {
		opts.Logger = NewLogger(logger)
	}
	return opts
}

func isPlugin(p client.Plugin) bool {
	_, ok := p.(*Plugin)
	return ok
}

func isTenantPropagator(p workflow.ContextPropagator) bool {
	return reflect.TypeOf(p) == reflect.TypeOf(interceptor.TenantPropagator())
}

// Dial connects a client configured by [ClientOptions].
func Dial(opts client.Options, logger *zap.Logger) (client.Client, error) {
	return client.Dial(ClientOptions(opts, logger))
}
