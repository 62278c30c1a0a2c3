// Command worker runs the quick start's workflow and activities on a
// Temporal frontend, recording outcomes in the chosen store.
//
//	go run ./worker -address 127.0.0.1:7233 -store postgres -metrics 127.0.0.1:9464
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"
	sdkworker "go.temporal.io/sdk/worker" // the SDK's worker; "worker" below is the library's
	"go.uber.org/zap"

	"github.com/tesserix/idempotency/examples/quickstart"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

func main() {
	address := flag.String("address", client.DefaultHostPort, "the Temporal frontend, host:port")
	namespace := flag.String("namespace", client.DefaultNamespace, "the Temporal namespace")
	// The store settings idempotencyctl takes: same flags, variables, defaults.
	var sc storeConfig
	flag.StringVar(&sc.name, "store", envOr("IDEMPOTENCY_STORE", "memory"), "where outcomes are recorded: memory, postgres or redis (or $IDEMPOTENCY_STORE)")
	flag.StringVar(&sc.postgresURL, "postgres-url", envOr("IDEMPOTENCY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL for -store postgres (or $IDEMPOTENCY_POSTGRES_URL)")
	flag.StringVar(&sc.schema, "schema", envOr("IDEMPOTENCY_SCHEMA", pgstore.DefaultSchema), "PostgreSQL schema holding the table (or $IDEMPOTENCY_SCHEMA)")
	flag.StringVar(&sc.table, "table", envOr("IDEMPOTENCY_TABLE", pgstore.DefaultTable), "PostgreSQL table holding the records (or $IDEMPOTENCY_TABLE)")
	flag.StringVar(&sc.redisAddr, "redis-addr", envOr("IDEMPOTENCY_REDIS_ADDR", "127.0.0.1:6379"), "Redis for -store redis (or $IDEMPOTENCY_REDIS_ADDR)")
	flag.StringVar(&sc.prefix, "prefix", envOr("IDEMPOTENCY_PREFIX", redisstore.DefaultPrefix), "Redis key prefix for -store redis (or $IDEMPOTENCY_PREFIX)")
	ledger := flag.String("ledger", "airline.ledger", "the file the stand-in airline appends each seat it sells to")
	metrics := flag.String("metrics", "", "serve Prometheus metrics at http://host:port/metrics (empty: off)")
	await := flag.Bool("await", false, "a call whose outcome nobody can state waits for a person's decision instead of failing the workflow")
	flag.Parse()

	logger, _ := zap.NewDevelopment()
	ctx := context.Background()
	st, err := openStore(ctx, sc)
	if err != nil {
		log.Fatalln("worker:", err)
	}

	// One plugin installs the library on the client and every worker built
	// on it: the dispatcher, the declarations, the tenant propagator, the
	// client's converter for the records, the Resolve activity.
	airline := &quickstart.Airline{Ledger: *ledger}
	idempotency, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  interceptor.Options{Store: st, AwaitDecision: *await}, // -await: a person decides
		Declarations: quickstart.Declarations(airline),
		Logger:       logger,
	})
	if err != nil {
		log.Fatalln("worker:", err)
	}
	opts := client.Options{HostPort: *address, Namespace: *namespace, Plugins: []client.Plugin{idempotency}}
	if *metrics != "" {
		// The library's metrics go through the worker's Temporal metrics handler.
		exporter, err := prometheus.New()
		if err != nil {
			log.Fatalln("worker:", err)
		}
		seconds := sdkmetric.NewView(sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
				Boundaries: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60}, // timers are in seconds
			}})
		meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithView(seconds)).Meter("quickstart")
		opts.MetricsHandler = opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{
			Meter:                meter,
			UseMonotonicCounters: true, // Prometheus counters (_total), not gauges
		})
		go func() { log.Println(http.ListenAndServe(*metrics, promhttp.Handler())) }()
	}
	c, err := client.Dial(opts)
	if err != nil {
		log.Fatalln("worker:", err)
	}
	defer c.Close()

	w := sdkworker.New(c, quickstart.TaskQueue, sdkworker.Options{}) // takes the plugin from the client
	w.RegisterWorkflow(quickstart.BookTrip)
	if err := w.Run(sdkworker.InterruptCh()); err != nil {
		log.Fatalln("worker:", err)
	}
}

// storeConfig says where the outcomes are recorded.
type storeConfig struct {
	name, postgresURL, schema, table, redisAddr, prefix string
}

// openStore opens the store that keeps the outcomes.
func openStore(ctx context.Context, sc storeConfig) (store.Store, error) {
	switch sc.name {
	case "memory": // one worker process only
		return store.NewMemory(store.MemoryOptions{})
	case "postgres":
		pool, err := pgxpool.New(ctx, sc.postgresURL)
		if err != nil {
			return nil, err
		}
		st, err := pgstore.New(pool, pgstore.Options{Schema: sc.schema, Table: sc.table})
		if err != nil {
			return nil, err
		}
		return st, st.EnsureSchema(ctx) // creates the table once; safe to repeat
	case "redis":
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{sc.redisAddr}})
		return redisstore.New(rdb, redisstore.Options{Prefix: sc.prefix})
	default:
		return nil, errors.New("-store must be memory, postgres or redis")
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
