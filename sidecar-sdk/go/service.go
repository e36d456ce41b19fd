package kplug

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/kplug/kplug/sidecar-sdk/go/kplugv1"
)

// service is the kplug.v1.Plugin gRPC service around a [Plugin].
//
// Nothing a plugin does turns into a gRPC error: invalid input, a handler
// error or panic, or an invalid response all become OUTCOME_FAILED with a
// message, because the operator shows that message on the resource, where
// the user looks, while a gRPC error would only be retried.
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
		Capabilities: capabilities(s.plugin),
		Description:  s.info.Description,
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
	response := s.handle(ctx, "Reconcile", s.plugin.Reconcile, in.GetImplementation(), in.GetObject(), in.GetExtensions())
	return response.ReconcileResponse(), nil
}

// Finalize calls the plugin's Finalize; without a [Finalizer], done at once.
func (s *service) Finalize(ctx context.Context, in *kplugv1.FinalizeRequest) (*kplugv1.FinalizeResponse, error) {
	handler := func(context.Context, *Request) (*Response, error) { return OK(), nil } // the default: done at once
	if f, ok := s.plugin.(Finalizer); ok {
		handler = f.Finalize
	}
	response := s.handle(ctx, "Finalize", handler, in.GetImplementation(), in.GetObject(), in.GetExtensions())
	if response.dropsInFinalize() {
		s.logger.Warn("a Finalize response carries no status, extension statuses or conditions; they were dropped (the object is being deleted)")
	}
	return response.FinalizeResponse(), nil
}

type handlerFunc func(context.Context, *Request) (*Response, error)

// handle decodes the request, calls the handler and turns every failure
// (bad JSON, an error, a panic, a nil response) into a FAILED response.
func (s *service) handle(ctx context.Context, call string, handler handlerFunc, implementation string, object []byte, extensions [][]byte) (response *Response) {
	ctx, span := handlerSpan(ctx, s.info.Name, call)
	defer span.End()
	request, err := DecodeRequest(implementation, object, extensions...)
	if err != nil {
		s.logger.Error(err.Error()+"; the handler was not called", "call", call)
		return Failed(err.Error())
	}
	logger := s.logger.With("call", call, "object", request.String())
	logger.Debug("calling the handler")
	defer func() {
		if p := recover(); p != nil {
			logger.Error("the handler panicked", "panic", p, "stack", string(debug.Stack()))
			response = Failed(fmt.Sprintf("the plugin's %s handler panicked: %v", call, p))
		}
	}()
	response, err = handler(ctx, request)
	switch {
	case err != nil:
		logger.Warn("the handler failed", "error", err)
		return Failed(err.Error())
	case response == nil:
		logger.Error("the handler returned neither a response nor an error")
		return Failed(fmt.Sprintf("the plugin's %s handler returned a nil *kplug.Response and no error; return kplug.OK(), kplug.Retry(...) or kplug.Failed(...)", call))
	case response.Err() != nil:
		logger.Error("the handler built an invalid response", "error", response.Err())
	}
	return response
}
