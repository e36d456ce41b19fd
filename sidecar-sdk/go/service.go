package kplug

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// service is the kplug.v1.Plugin gRPC service around a [Plugin].
//
// In Reconcile, Finalize and Hook nothing a plugin does turns into a gRPC
// error: invalid input, a handler error or panic, or an invalid response
// all become OUTCOME_FAILED with a message, because the operator shows
// that message on the resource, where the user looks, while a gRPC error
// would only be retried.
//
// Validate and Default are the exception (docs/protocol.md, "Admission:
// Validate and Default"): a handler error or panic, or an invalid answer,
// is a gRPC INTERNAL error carrying its message, and an object that is not
// JSON INVALID_ARGUMENT, so that the failure policy decides (the operator
// shows the message to the client). Mutate answers its failures the same
// way: there is no outcome in its answer, and the operator holds the
// object until a call succeeds. A call the plugin does not implement is
// UNIMPLEMENTED.
type service struct {
	kplugv1.UnimplementedPluginServer
	info   *Info
	plugin Plugin
	logger *slog.Logger
}

// GetInfo describes the plugin, as its heartbeats do.
func (s *service) GetInfo(context.Context, *kplugv1.GetInfoRequest) (*kplugv1.GetInfoResponse, error) {
	return &kplugv1.GetInfoResponse{
		Name:         s.info.Name,
		Version:      s.info.Version,
		Protocol:     Protocol,
		Offers:       s.info.offersProto(),
		Capabilities: capabilities(s.plugin, s.info),
		Description:  s.info.Description,
		Hooks:        s.info.hooksProto(),
		CallPolicies: s.info.callPoliciesProto(),
		Mutations:    s.info.mutationsProto(),
	}, nil
}

// Probe answers from the plugin's [ReadinessChecker]; without one, ready.
func (s *service) Probe(ctx context.Context, _ *kplugv1.ProbeRequest) (response *kplugv1.ProbeResponse, err error) {
	checker, ok := s.plugin.(ReadinessChecker)
	if !ok {
		return &kplugv1.ProbeResponse{Ready: true}, nil
	}
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("Readiness panicked; answering not ready", "panic", p, "stack", string(debug.Stack()))
			response = &kplugv1.ProbeResponse{Ready: false, Message: fmt.Sprintf("the plugin's Readiness check panicked: %v", p)}
		}
	}()
	r := checker.Readiness(ctx)
	return &kplugv1.ProbeResponse{Ready: r.Ready, Message: r.Message}, nil
}

// Reconcile calls the plugin's Reconcile.
func (s *service) Reconcile(ctx context.Context, in *kplugv1.ReconcileRequest) (*kplugv1.ReconcileResponse, error) {
	response := s.handle(ctx, "Reconcile", s.plugin.Reconcile, in.GetImplementation(), in.GetObject(), in.GetExtensions(), in.GetChildren())
	return response.ReconcileResponse(), nil
}

// Finalize calls the plugin's Finalize; without a [Finalizer], done at once.
func (s *service) Finalize(ctx context.Context, in *kplugv1.FinalizeRequest) (*kplugv1.FinalizeResponse, error) {
	handler := func(context.Context, *Request) (*Response, error) { return OK(), nil } // the default: done at once
	if f, ok := s.plugin.(Finalizer); ok {
		handler = f.Finalize
	}
	response := s.handle(ctx, "Finalize", handler, in.GetImplementation(), in.GetObject(), in.GetExtensions(), in.GetChildren())
	if response.dropsInFinalize() {
		s.logger.Warn("a Finalize response carries no status, extension statuses or conditions; they were dropped (the object is being deleted)")
	}
	return response.FinalizeResponse(), nil
}

type handlerFunc func(context.Context, *Request) (*Response, error)

// handle decodes the request, calls the handler and turns every failure
// (bad JSON, an error, a panic, a nil response) into a FAILED response.
func (s *service) handle(ctx context.Context, call string, handler handlerFunc, implementation string, object []byte, extensions, children [][]byte) (response *Response) {
	ctx, span := handlerSpan(ctx, s.info.Name, call)
	defer span.End()
	request, err := DecodeRequest(implementation, object, extensions...)
	if err == nil {
		err = request.DecodeChildren(children...)
	}
	if err != nil {
		s.logger.Error(err.Error()+"; the handler was not called", "call", call)
		return Failed(err.Error())
	}
	// Built only for a line that is written: otherwise every call would pay
	// for a logger of its own and the object's name.
	logger := func() *slog.Logger { return s.logger.With("call", call, "object", request.String()) }
	if s.logger.Enabled(ctx, slog.LevelDebug) {
		logger().Debug("calling the handler")
	}
	defer func() {
		if p := recover(); p != nil {
			logger().Error("the handler panicked", "panic", p, "stack", string(debug.Stack()))
			response = Failed(fmt.Sprintf("the plugin's %s handler panicked: %v", call, p))
		}
	}()
	response, err = handler(ctx, request)
	switch {
	case err != nil:
		logger().Warn("the handler failed", "error", err)
		return Failed(err.Error())
	case response == nil:
		logger().Error("the handler returned neither a response nor an error")
		return Failed(fmt.Sprintf("the plugin's %s handler returned a nil *kplug.Response and no error; return kplug.OK(), kplug.Retry(...) or kplug.Failed(...)", call))
	case response.Err() != nil:
		logger().Error("the handler built an invalid response", "error", response.Err())
	}
	return response
}

// Validate calls the plugin's [Validator]; without one, UNIMPLEMENTED.
func (s *service) Validate(ctx context.Context, in *kplugv1.ValidateRequest) (*kplugv1.ValidateResponse, error) {
	validator, ok := s.plugin.(Validator)
	if !ok {
		return nil, s.unimplemented("Validate")
	}
	var verdict *Validation
	err := s.admit(ctx, "Validate", in.GetImplementation(), in.GetOperation(), in.GetObject(), in.GetOldObject(),
		func(ctx context.Context, req *AdmissionRequest) (bool, error) {
			var err error
			verdict, err = validator.Validate(ctx, req)
			return verdict != nil, err
		})
	if err != nil {
		return nil, err
	}
	return verdict.ValidateResponse(), nil
}

// Default calls the plugin's [Defaulter]; without one, UNIMPLEMENTED.
func (s *service) Default(ctx context.Context, in *kplugv1.DefaultRequest) (*kplugv1.DefaultResponse, error) {
	defaulter, ok := s.plugin.(Defaulter)
	if !ok {
		return nil, s.unimplemented("Default")
	}
	var defaults *Defaults
	err := s.admit(ctx, "Default", in.GetImplementation(), in.GetOperation(), in.GetObject(), in.GetOldObject(),
		func(ctx context.Context, req *AdmissionRequest) (bool, error) {
			var err error
			defaults, err = defaulter.Default(ctx, req)
			return defaults != nil, err
		})
	if err != nil {
		return nil, err
	}
	response, err := defaults.DefaultResponse()
	if err != nil {
		s.logger.Error("the handler built invalid defaults", "call", "Default", "error", err)
		return nil, status.Error(codes.Internal, err.Error())
	}
	return response, nil
}

// admit decodes an admission request and calls the handler, turning bad
// input into INVALID_ARGUMENT and an error, a panic or a nil answer into
// INTERNAL.
func (s *service) admit(ctx context.Context, call, implementation string, operation kplugv1.Operation, object, oldObject []byte,
	handler func(context.Context, *AdmissionRequest) (bool, error)) error {
	ctx, span := handlerSpan(ctx, s.info.Name, call)
	defer span.End()
	request, err := DecodeAdmissionRequest(implementation, Operation(operation), object, oldObject)
	if err != nil {
		s.logger.Error(err.Error()+"; the handler was not called", "call", call)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	logger := s.logger.With("call", call, "object", request.Object.Ref().String())
	return guarded(logger, call, func() (bool, error) { return handler(ctx, request) })
}

// guarded calls a handler whose failures are gRPC errors (Validate,
// Default, Mutate): its error, a panic or a nil answer (answered false)
// becomes INTERNAL with a message.
func guarded(logger *slog.Logger, call string, handler func() (bool, error)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			logger.Error("the handler panicked", "panic", p, "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, fmt.Sprintf("the plugin's %s handler panicked: %v", call, p))
		}
	}()
	answered, err := handler()
	switch {
	case err != nil:
		logger.Warn("the handler failed", "error", err)
		return status.Error(codes.Internal, err.Error())
	case !answered:
		logger.Error("the handler returned neither an answer nor an error")
		return status.Error(codes.Internal, fmt.Sprintf("the plugin's %s handler returned a nil answer and no error", call))
	}
	return nil
}

// Mutate calls the plugin's [Mutator]; without one, UNIMPLEMENTED. Its
// failures are gRPC errors, as for Default: the operator holds the object
// until a call succeeds, and shows the message on the base object.
func (s *service) Mutate(ctx context.Context, in *kplugv1.MutateRequest) (*kplugv1.MutateResponse, error) {
	mutator, ok := s.plugin.(Mutator)
	if !ok {
		return nil, s.unimplemented("Mutate")
	}
	ctx, span := handlerSpan(ctx, s.info.Name, "Mutate")
	defer span.End()
	call, err := DecodeMutateCall(in)
	if err != nil {
		s.logger.Error(err.Error()+"; the handler was not called", "call", "Mutate")
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	logger := s.logger.With("call", "Mutate", "object", call.Object.Ref().String())
	var mutation *Mutation
	err = guarded(logger, "Mutate", func() (bool, error) {
		var err error
		mutation, err = mutator.Mutate(ctx, call)
		return mutation != nil, err
	})
	if err != nil {
		return nil, err
	}
	response, err := mutation.MutateResponse()
	if err != nil {
		logger.Error("the handler built an invalid mutation", "error", err)
		return nil, status.Error(codes.Internal, err.Error())
	}
	return response, nil
}

// Hook calls the plugin's [HookHandler]; without one, UNIMPLEMENTED.
func (s *service) Hook(ctx context.Context, in *kplugv1.HookRequest) (*kplugv1.HookResponse, error) {
	handler, ok := s.plugin.(HookHandler)
	if !ok {
		return nil, s.unimplemented("Hook")
	}
	return s.hook(ctx, handler, in).HookResponse(), nil
}

func (s *service) hook(ctx context.Context, handler HookHandler, in *kplugv1.HookRequest) (response *Response) {
	ctx, span := handlerSpan(ctx, s.info.Name, "Hook")
	defer span.End()
	call, err := DecodeHookCall(in)
	if err != nil {
		s.logger.Error(err.Error()+"; the handler was not called", "call", "Hook", "hook", in.GetHook())
		return Failed(err.Error())
	}
	logger := s.logger.With("call", "Hook", "hook", call.Hook, "object", call.Request.String())
	defer func() {
		if p := recover(); p != nil {
			logger.Error("the handler panicked", "panic", p, "stack", string(debug.Stack()))
			response = Failed(fmt.Sprintf("the plugin's Hook handler panicked: %v", p))
		}
	}()
	response, err = handler.Hook(ctx, call)
	switch {
	case err != nil:
		logger.Warn("the hook failed", "error", err)
		return Failed(err.Error())
	case response == nil:
		logger.Error("the hook returned neither a response nor an error")
		return Failed("the plugin's Hook handler returned a nil *kplug.Response and no error; return kplug.OK(), kplug.Retry(...) or kplug.Failed(...)")
	}
	return response
}

// unimplemented answers a call whose capability the plugin does not
// advertise (the operator calls only what is advertised).
func (s *service) unimplemented(call string) error {
	return status.Errorf(codes.Unimplemented, "plugin %s does not implement %s", s.info.Name, call)
}
