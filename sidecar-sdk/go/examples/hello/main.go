// Command hello is the smallest useful kplug plugin: it greets every
// example.com Greeting object by name, with the punctuation its
// GreetingHelloExtension asks for.
//
// The kind is in examples/hello/crd.yaml; docs/your-own-kind.md runs this
// plugin next to the operator:
//
//	KPLUG_SOCKET_DIR=/tmp/kplug go run ./examples/hello
package main

import (
	"context"
	"fmt"

	"github.com/kplug/kplug/sidecar-sdk/go"
)

// GreetingSpec is the spec of a Greeting.
type GreetingSpec struct {
	Salutation string `json:"salutation"`
}

// HelloSettings are the Hello implementation's own settings, in a
// GreetingHelloExtension.
type HelloSettings struct {
	Punctuation string `json:"punctuation"`
}

// Hello is the plugin.
type Hello struct{}

// Reconcile greets the object.
func (Hello) Reconcile(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	spec := GreetingSpec{Salutation: "hello"}
	if err := req.DecodeSpec(&spec); err != nil {
		return nil, err
	}
	settings := HelloSettings{Punctuation: "!"}
	if ext := req.Extension("GreetingHelloExtension"); ext != nil {
		if err := ext.DecodeSpec(&settings); err != nil {
			return nil, err
		}
	}
	greeting := fmt.Sprintf("%s, %s%s", spec.Salutation, req.Name(), settings.Punctuation)
	return kplug.OK().
		WithMessage("greeted "+req.Name()).
		WithStatus(map[string]any{"greeting": greeting}).
		WithEvent("Greeted", greeting), nil
}

func main() {
	kplug.Main(kplug.Info{
		Name:        "hello",
		Version:     "1.0.0",
		Description: "greets Greeting objects",
		Offers: []kplug.Offer{{
			Base:           kplug.GroupKind{Group: "example.com", Kind: "Greeting"},
			Implementation: "Hello",
			Extensions:     []kplug.GroupKind{{Group: "example.com", Kind: "GreetingHelloExtension"}},
		}},
	}, Hello{})
}
