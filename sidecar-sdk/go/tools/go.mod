// The protoc plugins for the kplug Go SDK's stubs, pinned here: a module of
// their own, so that the SDK's go.mod (which plugin authors' builds read)
// stays small. `make generate` builds them into ../.bin; buf itself is the
// repository's npm pin (node_modules/.bin/buf, from `make tools`).
module github.com/kplug/kplug/sidecar-sdk/go/tools

go 1.25.10

tool (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	golang.org/x/net v0.57.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260715232425-e75dac1f907d // indirect
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
