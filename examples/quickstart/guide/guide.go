// Package guide holds the code docs/GUIDE.md shows, so that every Go snippet
// there compiles: TestGuideSnippets keeps each one whole lines of this file,
// word for word.
package guide

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tesserix/idempotency/activity"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/pgstore"
	"github.com/tesserix/idempotency/redisstore"
	"github.com/tesserix/idempotency/store"
	"github.com/tesserix/idempotency/worker"
)

// SeatRequest is setSeat's one struct argument.
type SeatRequest struct {
	Flight string `json:"flight"`
	Seat   string `json:"seat"`
}

// ChargeRequest is chargeCard's one struct argument.
type ChargeRequest struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

func lookupFare(context.Context, string) (int, error)             { return 125, nil }
func setSeat(context.Context, SeatRequest) error                  { return nil }
func charge(context.Context, string, int, string) (string, error) { return "ch_1", nil }
func chargeCard(context.Context, ChargeRequest) (string, error)   { return "ch_1", nil }
func book(context.Context, SeatRequest) (string, error)           { return "CONF-1", nil }
func reserveSeat(context.Context, SeatRequest) (string, error)    { return "12A", nil }

// The declarations the guide's "Declare policies" shows.
var LookupFare = activity.ReadOnly(lookupFare)
var SetSeat = activity.Idempotent(setSeat, "flight", "seat") // JSON field names of its one struct argument
var Charge = activity.MustDeclare(charge, activity.Policy{   // positional arguments: name them once
	Kind:         activity.KindEffectful,
	Params:       []string{"card", "amount", "requestID"},
	KeyArguments: []string{"card", "amount"},
})

// ChargeCard is the guide's declaration with definite failures.
var ChargeCard = activity.MustDeclare(chargeCard, activity.Policy{
	Kind:           activity.KindEffectful,
	KeyArguments:   []string{"order"},
	DefiniteErrors: []string{"CardDeclined"},
})

// Book and Reserve are the guide's other declarations.
var (
	Book    = activity.Effectful(book, "flight", "seat")
	Reserve = activity.Transactional(reserveSeat, "flight", "seat")
)

// Install is the guide's "Install the plugin".
func Install(st store.Store, addr string) (sdkworker.Worker, error) {
	p, err := worker.NewPlugin(worker.PluginOptions{
		Idempotency:  interceptor.Options{Store: st},
		Declarations: []*activity.Declaration{Book, LookupFare}, // registered on each worker as it starts
	})
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(client.Options{HostPort: addr, Plugins: []client.Plugin{p}})
	if err != nil {
		return nil, err
	}
	w := sdkworker.New(c, "bookings", sdkworker.Options{}) // every worker on c takes the plugin
	return w, nil
}

// BookOnce is the guide's "Handle the indeterminate error".
func BookOnce(ctx workflow.Context, req SeatRequest) (string, error) {
	var confirmation string // Book returns a string
	err := workflow.ExecuteActivity(ctx, "Book", req).Get(ctx, &confirmation)
	if o, ok := activity.AsIndeterminate(err); ok {
		// o.Activity, o.Tenant, o.Key, o.Reason, o.EffectMayHaveLanded: hand them to a person
		// (a signal carries the decision back), and book nothing twice meanwhile.
		return "", fmt.Errorf("booking %s needs a person: %s", o.Key, o.Message())
	}
	return confirmation, err
}

// Postgres is the guide's PostgreSQL store.
func Postgres(ctx context.Context, pool *pgxpool.Pool) error {
	st, err := pgstore.New(pool, pgstore.Options{Schema: "public", Table: "idempotency_records"})
	if err != nil {
		return err
	}
	defer st.Close()
	return st.EnsureSchema(ctx) // once per deployment
}

// Portable is the guide's store on a distributed PostgreSQL engine.
func Portable(ctx context.Context, pool *pgxpool.Pool) error {
	_, caps, err := pgstore.DetectCapabilities(ctx, pool) // every capability on PostgreSQL, none on the three
	if err != nil {
		return err
	}
	st, err := pgstore.New(pool, pgstore.Options{Schema: "idempotency", Capabilities: &caps})
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// NexusSeats is the guide's Nexus operation, declared on w.
func NexusSeats(w *worker.Worker) error {
	op, err := interceptor.NexusOperation(w.Interceptor(), "book-seat",
		activity.Policy{Kind: activity.KindEffectful, KeyArguments: []string{"flight", "seat"}},
		func(ctx context.Context, req SeatRequest, _ nexus.StartOperationOptions) (string, error) {
			return book(ctx, req)
		})
	if err != nil {
		return err
	}
	svc := nexus.NewService("seats")
	if err := svc.Register(op); err != nil {
		return err
	}
	w.RegisterNexusService(svc)
	return nil
}

// NexusTenants is the guide's handler worker serving two tenants, each
// through a Nexus endpoint of its own.
func NexusTenants(c client.Client, st store.Store) (*worker.Worker, error) {
	return worker.New(c, "seats", worker.Options{Idempotency: interceptor.Options{
		Store: st,
		// The server says which endpoint a request came through; the caller
		// says nothing that counts.
		NexusTenant: interceptor.NexusTenantByEndpoint(map[string]string{
			"seats-acme":   "acme",
			"seats-globex": "globex",
		}),
	}})
}

// Redis is the guide's Redis store.
func Redis(rdb redis.UniversalClient) error {
	st, err := redisstore.New(rdb, redisstore.Options{Prefix: "idempotency"})
	if err != nil {
		return err
	}
	return st.Close()
}
