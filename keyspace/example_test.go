package keyspace_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/tesserix/idempotency/keyspace"
)

// A retry that renumbers its request id derives the same key, and 2 and 2.0
// are one number.
func ExampleDerive() {
	first, err := keyspace.Derive(keyspace.Input{
		Tenant:       "acme",
		Run:          "run_1",
		Activity:     "book",
		Arguments:    map[string]any{"flight": "BA117", "seats": 2, "request_id": "a"},
		KeyArguments: []string{"flight", "seats"},
	})
	if err != nil {
		panic(err)
	}
	retry, err := keyspace.Derive(keyspace.Input{
		Tenant:       "acme",
		Run:          "run_1",
		Activity:     "book",
		Arguments:    map[string]any{"request_id": "b", "seats": 2.0, "flight": "BA117"},
		KeyArguments: []string{"seats", "flight"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(first == retry)
	fmt.Println(first)
	// Output:
	// true
	// v1:dbc5bb2b1658f1bcfaecb1454e5471c3d18704bda550eecb35659dd31c6848b9
}

// Arguments can be the activity's request struct; key arguments are its
// JSON field names, and a struct and a map with the same JSON agree.
func ExampleDerive_struct() {
	type Booking struct {
		Flight    string `json:"flight"`
		RequestID string `json:"request_id"`
	}
	fromStruct, _ := keyspace.Derive(keyspace.Input{
		Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments:    Booking{Flight: "BA117", RequestID: "a"},
		KeyArguments: []string{"flight"},
	})
	var decoded map[string]any
	_ = json.Unmarshal([]byte(`{"flight":"BA117","request_id":"z"}`), &decoded)
	fromJSON, _ := keyspace.Derive(keyspace.Input{
		Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments:    decoded,
		KeyArguments: []string{"flight"},
	})
	fmt.Println(fromStruct == fromJSON)
	// Output: true
}

// A key argument the call did not carry means no key can be derived.
func ExampleDerive_missingArgument() {
	_, err := keyspace.Derive(keyspace.Input{
		Tenant: "acme", Run: "run_1", Activity: "book",
		Arguments:    map[string]any{"request_id": "a"},
		KeyArguments: []string{"flight"},
	})
	var missing *keyspace.MissingArgumentError
	fmt.Println(errors.Is(err, keyspace.ErrMissingArgument), errors.As(err, &missing), missing.Name)
	// Output: true true flight
}

func ExampleFieldNames() {
	type Booking struct {
		Flight    string `json:"flight"`
		Seat      string `json:"seat,omitempty"`
		Internal  string `json:"-"`
		RequestID string
	}
	names, err := keyspace.FieldNames(reflect.TypeFor[Booking]())
	fmt.Println(names, err)
	// Output: [flight seat RequestID] <nil>
}

func ExampleParseKey() {
	_, err := keyspace.ParseKey("v1:not-a-key")
	fmt.Println(errors.Is(err, keyspace.ErrInvalidInput))
	// Output: true
}
