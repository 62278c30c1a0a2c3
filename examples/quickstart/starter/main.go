// Command starter starts one quick start trip on a Temporal frontend and
// prints its itinerary as JSON. The worker (../worker) must be running.
//
//	go run ./starter -address 127.0.0.1:7233 -passenger Ada -flight BA117
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tesserix/idempotency/examples/quickstart"
	"github.com/tesserix/idempotency/interceptor"
	"github.com/tesserix/idempotency/worker"
)

func main() {
	address := flag.String("address", client.DefaultHostPort, "the Temporal frontend, host:port")
	namespace := flag.String("namespace", client.DefaultNamespace, "the Temporal namespace")
	tenant := flag.String("tenant", "acme", "the tenant the trip's records belong to")
	passenger := flag.String("passenger", "Ada", "who travels")
	flight := flag.String("flight", "BA117", "the flight to book")
	flag.Parse()

	// The plugin's client part carries the tenant to the workflow and its activities.
	c, err := client.Dial(client.Options{HostPort: *address, Namespace: *namespace,
		Plugins: []client.Plugin{worker.ClientPlugin()}})
	if err != nil {
		log.Fatalln("starter:", err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(interceptor.WithTenant(ctx, *tenant), client.StartWorkflowOptions{
		ID:        fmt.Sprintf("trip-%s-%s-%d", *passenger, *flight, time.Now().UnixNano()),
		TaskQueue: quickstart.TaskQueue,
	}, quickstart.BookTrip, *passenger, *flight)
	if err != nil {
		log.Fatalln("starter:", err)
	}
	var it quickstart.Itinerary
	if err := run.Get(ctx, &it); err != nil {
		log.Fatalln("starter:", err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(it)
}
