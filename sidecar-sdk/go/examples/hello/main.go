// Command hello is the smallest kplug plugin that shows every part of a
// plugin: it greets every example.com Greeting object by name (a status and
// an Event), with the punctuation its GreetingHelloExtension asks for (and
// tells that extension, in its status, which greeting used it), and says
// goodbye when the object is deleted (Finalize).
//
// The kind is in examples/hello/crd.yaml; run this plugin next to an
// operator for it (docs/your-own-kind.md shows how to start one):
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
	ext := req.Extension("GreetingHelloExtension")
	if ext != nil {
		if err := ext.DecodeSpec(&settings); err != nil {
			return nil, err
		}
	}
	greeting := fmt.Sprintf("%s, %s%s", spec.Salutation, req.Name(), settings.Punctuation)
	response := kplug.OK().
		WithMessage("greeted "+req.Name()).
		WithStatus(map[string]any{"greeting": greeting}).
		WithEvent("Greeted", greeting)
	if ext != nil {
		response.WithExtensionStatus(ext, map[string]any{"lastUsedBy": req.Name()})
	}
	return response, nil
}

// Finalize is called before the object is deleted. Hello made nothing to
// clean up, so it only says goodbye; OK lets the object go.
func (Hello) Finalize(_ context.Context, req *kplug.Request) (*kplug.Response, error) {
	return kplug.OK().WithEvent("SaidGoodbye", "goodbye, "+req.Name()), nil
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
