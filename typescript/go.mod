// This file keeps the TypeScript package out of the Go module above it:
// go ./... patterns (go vet, go test, staticcheck) would otherwise walk
// into node_modules, where npm packages ship Go sources of their own.
module github.com/tesserix/idempotency/typescript

go 1.26
