package kplug

import "fmt"

// Request is a Reconcile or Finalize call: the base object, the extensions
// the plugin declared for the chosen implementation, and the children the
// operator manages for it on the plugin's behalf.
type Request struct {
	// Implementation is the implementation the operator chose, one of the
	// plugin's offers (for Finalize: the one recorded in the object's status).
	Implementation string
	// Object is the base object (apiVersion, kind, metadata, spec, status).
	Object *Object
	// Extensions are the extension objects of the kinds the plugin declared,
	// in the order the base object references them. Missing ones are never
	// sent: the operator waits until they exist.
	Extensions []*Object
	// Children are the observed children of the base object that the
	// operator manages for this plugin (of the kinds its offer declares in
	// [Offer.Children]), as they are now: with their status (e.g. a
	// Deployment's readyReplicas), including those being deleted. Empty
	// when the offer declares no child kinds.
	Children []*Object
}

// DecodeRequest decodes a request from the JSON the operator sends. The
// SDK does this for every call; it is exported for plugins' unit tests:
//
//	req, err := kplug.DecodeRequest("PostgreSQL", []byte(`{"kind": "DatabaseTable", ...}`))
//	resp, err := plugin.Reconcile(ctx, req)
//
// Its errors are the messages every SDK answers with (an OUTCOME_FAILED
// response, without calling the plugin), e.g. "kplug: the base object is
// not valid JSON: ..." or "kplug: extension #1 is not a JSON object".
func DecodeRequest(implementation string, object []byte, extensions ...[]byte) (*Request, error) {
	base, err := decodeObject(object, "the base object")
	if err != nil {
		return nil, err
	}
	req := &Request{Implementation: implementation, Object: base, Extensions: make([]*Object, 0, len(extensions))}
	for i, data := range extensions {
		e, err := decodeObject(data, fmt.Sprintf("extension #%d", i))
		if err != nil {
			return nil, err
		}
		req.Extensions = append(req.Extensions, e)
	}
	return req, nil
}

// DecodeChildren decodes the observed children from the JSON the operator
// sends into r.Children (replacing them), as the SDK does for every call;
// it is exported for plugins' unit tests:
//
//	req, err := kplug.DecodeRequest("Hello", object)
//	err = req.DecodeChildren([]byte(`{"apiVersion": "v1", "kind": "ConfigMap", ...}`))
//
// Its errors are the protocol's messages, e.g. "kplug: child #0 is not a
// JSON object"; r is unchanged then.
func (r *Request) DecodeChildren(children ...[]byte) error {
	decoded := make([]*Object, 0, len(children))
	for i, data := range children {
		c, err := decodeObject(data, fmt.Sprintf("child #%d", i))
		if err != nil {
			return err
		}
		decoded = append(decoded, c)
	}
	r.Children = decoded
	return nil
}

// Name is the base object's name.
func (r *Request) Name() string { return r.Object.Name() }

// Namespace is the base object's namespace; empty for a cluster-scoped object.
func (r *Request) Namespace() string { return r.Object.Namespace() }

// Generation is the base object's metadata.generation, 0 when absent.
func (r *Request) Generation() int64 { return r.Object.Generation() }

// Spec is the base object's spec; nil when absent or not a JSON object.
func (r *Request) Spec() map[string]any { return r.Object.Spec() }

// DecodeSpec decodes the base object's spec into v, a pointer to your own type.
func (r *Request) DecodeSpec(v any) error { return r.Object.DecodeSpec(v) }

// Extension is the first extension of kind (e.g.
// "DatabaseTablePostgreSqlExtension"), or nil when none was sent.
func (r *Request) Extension(kind string) *Object {
	for _, e := range r.Extensions {
		if e.Kind() == kind {
			return e
		}
	}
	return nil
}

// ExtensionsOf lists the extensions of kind, in reference order.
func (r *Request) ExtensionsOf(kind string) []*Object {
	var found []*Object
	for _, e := range r.Extensions {
		if e.Kind() == kind {
			found = append(found, e)
		}
	}
	return found
}

// Child is the observed child of kind (e.g. "Deployment") named name, or
// nil when there is none (not created yet, or deleted since).
func (r *Request) Child(kind, name string) *Object {
	for _, c := range r.Children {
		if c.Kind() == kind && c.Name() == name {
			return c
		}
	}
	return nil
}

// String is the base object's "Kind namespace/name".
func (r *Request) String() string { return r.Object.Ref().String() }
