package io.kplug.sidecar;

import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import java.lang.System.Logger;
import java.lang.System.Logger.Level;
import java.util.List;
import kplug.v1.PluginGrpc;
import kplug.v1.PluginOuterClass;
import kplug.v1.PluginOuterClass.DefaultRequest;
import kplug.v1.PluginOuterClass.FinalizeRequest;
import kplug.v1.PluginOuterClass.HookRequest;
import kplug.v1.PluginOuterClass.MutateRequest;
import kplug.v1.PluginOuterClass.ReconcileRequest;
import kplug.v1.PluginOuterClass.ValidateRequest;
import kplug.v1.Types;

/**
 * The kplug.v1.Plugin gRPC service around a {@link Plugin}.
 *
 * <p>In Reconcile, Finalize and Hook nothing a plugin does turns into a gRPC error: invalid input,
 * a handler's exception or an invalid response all become OUTCOME_FAILED with a message, because
 * the operator shows that message on the resource, where the user looks, while a gRPC error would
 * only be retried.
 *
 * <p>Validate and Default are the exception (docs/protocol.md, "Admission: Validate and Default"):
 * a handler's exception, or an invalid answer, is a gRPC INTERNAL error carrying its message, and
 * an object that is not JSON INVALID_ARGUMENT, so that the failure policy decides. Mutate answers
 * its failures the same way: there is no outcome in its answer, and the operator holds the object
 * until a call succeeds. A call the plugin does not override is UNIMPLEMENTED.
 */
final class PluginService extends PluginGrpc.PluginImplBase {
  private final Info info;
  private final Plugin plugin;
  private final Capabilities capabilities;
  private final Logger logger;

  PluginService(Info info, Plugin plugin, Capabilities capabilities, Logger logger) {
    this.info = info;
    this.plugin = plugin;
    this.capabilities = capabilities;
    this.logger = logger;
  }

  /** What GetInfo answers, and what every heartbeat carries too. */
  static PluginOuterClass.GetInfoResponse describe(Info info, Capabilities capabilities) {
    var response =
        PluginOuterClass.GetInfoResponse.newBuilder()
            .setName(info.name())
            .setVersion(info.version())
            .setProtocol(Protocol.PROTOCOL)
            .addAllCapabilities(capabilities.toProto())
            .setDescription(info.description());
    info.offers().forEach(o -> response.addOffers(o.toProto()));
    info.hooks().forEach(h -> response.addHooks(h.toProto()));
    info.callPolicies().forEach(p -> response.addCallPolicies(p.toProto()));
    info.mutations()
        .forEach(m -> response.addMutations(Types.Mutation.newBuilder().setKind(m.toProto())));
    return response.build();
  }

  @Override
  public void getInfo(
      PluginOuterClass.GetInfoRequest request,
      StreamObserver<PluginOuterClass.GetInfoResponse> out) {
    answer(out, describe(info, capabilities));
  }

  @Override
  public void probe(
      PluginOuterClass.ProbeRequest request, StreamObserver<PluginOuterClass.ProbeResponse> out) {
    Readiness readiness;
    try {
      readiness = plugin.readiness();
    } catch (RuntimeException e) {
      logger.log(
          Level.ERROR, "plugin " + info.name() + ": readiness() threw; answering not ready", e);
      readiness = Readiness.notReady("the plugin's readiness check failed: " + describe(e));
    }
    if (readiness == null) {
      readiness = Readiness.notReady("the plugin's readiness() returned null");
    }
    answer(
        out,
        PluginOuterClass.ProbeResponse.newBuilder()
            .setReady(readiness.ready())
            .setMessage(readiness.message())
            .build());
  }

  @Override
  public void reconcile(
      ReconcileRequest in, StreamObserver<PluginOuterClass.ReconcileResponse> out) {
    Response response =
        handle(
            "Reconcile",
            plugin::reconcile,
            in.getImplementation(),
            in.getObject(),
            bytes(in.getExtensionsList()),
            bytes(in.getChildrenList()));
    answer(out, response.toReconcileResponse());
  }

  @Override
  public void finalize(FinalizeRequest in, StreamObserver<PluginOuterClass.FinalizeResponse> out) {
    Response response =
        handle(
            "Finalize",
            plugin::finalize,
            in.getImplementation(),
            in.getObject(),
            bytes(in.getExtensionsList()),
            bytes(in.getChildrenList()));
    if (response.dropsInFinalize()) {
      logger.log(
          Level.WARNING,
          "plugin "
              + info.name()
              + ": a Finalize response carries no status, extension statuses or conditions; they"
              + " were dropped (the object is being deleted)");
    }
    answer(out, response.toFinalizeResponse());
  }

  @Override
  public void hook(HookRequest in, StreamObserver<PluginOuterClass.HookResponse> out) {
    if (!capabilities.hooks()) {
      unimplemented(out, "Hook");
      return;
    }
    Span span = Tracing.handlerSpan(info.name(), "Hook");
    Response response;
    try (Scope scope = span.makeCurrent()) {
      HookCall call;
      try {
        call = HookCall.decode(in);
      } catch (InvalidRequestException e) {
        logger.log(
            Level.ERROR,
            "plugin " + info.name() + ": " + e.getMessage() + "; the Hook handler was not called");
        answer(out, Response.failed(e.getMessage()).toHookResponse());
        return;
      }
      String what = "Hook " + call.hook() + " on " + call.request();
      response = invoke(what, () -> plugin.hook(call));
      invalid(what, response.hookProblem());
    } finally {
      span.end();
    }
    answer(out, response.toHookResponse());
  }

  @Override
  public void validate(ValidateRequest in, StreamObserver<PluginOuterClass.ValidateResponse> out) {
    if (!capabilities.validates()) {
      unimplemented(out, "Validate");
      return;
    }
    admit(
        out,
        "Validate",
        in.getImplementation(),
        in.getOperation(),
        in.getObject().toByteArray(),
        in.getOldObject().toByteArray(),
        request -> {
          Validation verdict = plugin.validate(request);
          return verdict == null ? null : verdict.toValidateResponse();
        });
  }

  @Override
  public void default_(DefaultRequest in, StreamObserver<PluginOuterClass.DefaultResponse> out) {
    if (!capabilities.defaults()) {
      unimplemented(out, "Default");
      return;
    }
    admit(
        out,
        "Default",
        in.getImplementation(),
        in.getOperation(),
        in.getObject().toByteArray(),
        in.getOldObject().toByteArray(),
        request -> {
          Defaults defaults = plugin.defaults(request);
          return defaults == null ? null : wire("Default", defaults::toDefaultResponse);
        });
  }

  @Override
  public void mutate(MutateRequest in, StreamObserver<PluginOuterClass.MutateResponse> out) {
    if (!capabilities.mutates()) {
      unimplemented(out, "Mutate");
      return;
    }
    guarded(
        out,
        "Mutate",
        () -> MutateCall.decode(in),
        MutateCall::object,
        call -> {
          Mutation mutation = plugin.mutate(call);
          return mutation == null ? null : wire("Mutate", mutation::toMutateResponse);
        });
  }

  /**
   * The wire answer of a Default or Mutate builder; a mistake made while building (an {@link
   * IllegalStateException} "plugin bug: ...") is logged and answered INTERNAL.
   */
  private <T> T wire(String call, java.util.function.Supplier<T> build) throws StatusException {
    try {
      return build.get();
    } catch (IllegalStateException e) {
      logger.log(
          Level.ERROR,
          "plugin "
              + info.name()
              + ": the "
              + call
              + " handler built an invalid answer: "
              + e.getMessage());
      throw new StatusException(Status.INTERNAL.withDescription(e.getMessage()));
    }
  }

  /** A Reconcile or Finalize handler. */
  private interface Handler {
    Response handle(Request request) throws Exception;
  }

  /** A Validate or Default handler, returning the wire answer (null: the handler returned null). */
  private interface AdmissionHandler<T> {
    T handle(AdmissionRequest request) throws Exception;
  }

  /** Something a handler runs. */
  private interface Body<T> {
    T run() throws Exception;
  }

  private static List<byte[]> bytes(List<com.google.protobuf.ByteString> objects) {
    return objects.stream().map(com.google.protobuf.ByteString::toByteArray).toList();
  }

  /**
   * Decodes the request, calls the handler and turns every failure (bad JSON, an exception, a null
   * response) into a FAILED response.
   */
  private Response handle(
      String call,
      Handler handler,
      String implementation,
      com.google.protobuf.ByteString object,
      List<byte[]> extensions,
      List<byte[]> children) {
    Span span = Tracing.handlerSpan(info.name(), call);
    try (Scope scope = span.makeCurrent()) {
      Request request;
      try {
        request = Request.decode(implementation, object.toByteArray(), extensions, children);
      } catch (InvalidRequestException e) {
        logger.log(
            Level.ERROR,
            "plugin "
                + info.name()
                + ": "
                + e.getMessage()
                + "; the "
                + call
                + " handler was not called");
        return Response.failed(e.getMessage());
      }
      String what = call + " of " + request;
      Response response = invoke(what, () -> handler.handle(request));
      invalid(what, response.problem());
      return response;
    } finally {
      span.end();
    }
  }

  /** Runs a Reconcile, Finalize or Hook handler; an exception or null becomes FAILED. */
  private Response invoke(String what, Body<Response> body) {
    String call = what.substring(0, what.indexOf(' '));
    Response response;
    try {
      response = interruptible(body);
    } catch (Exception e) {
      logger.log(Level.WARNING, "plugin " + info.name() + ": the " + what + " failed", e);
      return Response.failed(describe(e));
    } catch (Error e) {
      logger.log(Level.ERROR, "plugin " + info.name() + ": the " + what + " failed", e);
      return Response.failed("the plugin's " + call + " handler failed: " + describe(e));
    }
    if (response == null) {
      logger.log(Level.ERROR, "plugin " + info.name() + ": the " + what + " returned null");
      return Response.failed(
          "the plugin's "
              + call
              + " handler returned null; return Response.ok(), Response.retry(...) or"
              + " Response.failed(...)");
    }
    return response;
  }

  /** Logs the mistake a handler made building its answer, which is sent as FAILED. */
  private void invalid(String what, String problem) {
    if (problem != null) {
      logger.log(
          Level.ERROR,
          "plugin " + info.name() + ": the " + what + " built an invalid response: " + problem);
    }
  }

  /**
   * Decodes an admission request and calls the handler, turning bad input into INVALID_ARGUMENT and
   * an exception or a null answer into INTERNAL.
   */
  private <T> void admit(
      StreamObserver<T> out,
      String call,
      String implementation,
      Types.Operation operation,
      byte[] object,
      byte[] oldObject,
      AdmissionHandler<T> handler) {
    guarded(
        out,
        call,
        () -> {
          Operation op =
              switch (operation) {
                case OPERATION_CREATE -> Operation.CREATE;
                case OPERATION_UPDATE -> Operation.UPDATE;
                default ->
                    throw new InvalidRequestException(
                        "kplug: the admission request's operation "
                            + operation.getNumber()
                            + " is neither CREATE nor UPDATE");
              };
          return AdmissionRequest.decode(implementation, op, object, oldObject);
        },
        AdmissionRequest::object,
        handler::handle);
  }

  /** Decodes a request; its message is what INVALID_ARGUMENT carries. */
  private interface Decoder<R> {
    R decode() throws InvalidRequestException;
  }

  /** Calls a handler with a decoded request. */
  private interface Caller<R, T> {
    T call(R request) throws Exception;
  }

  /**
   * A call whose failures are gRPC errors (Validate, Default, Mutate): decodes the request and
   * calls the handler, turning bad input into INVALID_ARGUMENT and an exception or a null answer
   * into INTERNAL ({@code object} names the request's object in the logs).
   */
  private <R, T> void guarded(
      StreamObserver<T> out,
      String call,
      Decoder<R> decoder,
      java.util.function.Function<R, KubeObject> object,
      Caller<R, T> handler) {
    Span span = Tracing.handlerSpan(info.name(), call);
    try (Scope scope = span.makeCurrent()) {
      R request;
      try {
        request = decoder.decode();
      } catch (InvalidRequestException e) {
        logger.log(
            Level.ERROR,
            "plugin "
                + info.name()
                + ": "
                + e.getMessage()
                + "; the "
                + call
                + " handler was not called");
        out.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asException());
        return;
      }
      String what = call + " of " + object.apply(request);
      T answer;
      try {
        answer = interruptible(() -> handler.call(request));
      } catch (StatusException e) {
        out.onError(e);
        return;
      } catch (Exception | Error e) {
        logger.log(Level.WARNING, "plugin " + info.name() + ": the " + what + " failed", e);
        out.onError(Status.INTERNAL.withDescription(describe(e)).asException());
        return;
      }
      if (answer == null) {
        logger.log(Level.ERROR, "plugin " + info.name() + ": the " + what + " returned null");
        out.onError(
            Status.INTERNAL
                .withDescription("the plugin's " + call + " handler returned null")
                .asException());
        return;
      }
      answer(out, answer);
    } finally {
      span.end();
    }
  }

  /**
   * Runs the body on this thread, interrupting the thread if the operator gives up on the call (its
   * deadline passes, or it cancels) while the body runs: blocking I/O and sleeps in the handler
   * then end with an {@link InterruptedException} or its kin. The interrupt never outlives the
   * body, since the thread goes back to gRPC's pool.
   */
  private static <T> T interruptible(Body<T> body) throws Exception {
    Context context = Context.current();
    Thread thread = Thread.currentThread();
    Object lock = new Object();
    boolean[] running = {true};
    Context.CancellationListener interrupt =
        cancelled -> {
          synchronized (lock) {
            if (running[0]) {
              thread.interrupt();
            }
          }
        };
    context.addListener(interrupt, Runnable::run);
    try {
      return body.run();
    } finally {
      synchronized (lock) {
        running[0] = false;
      }
      context.removeListener(interrupt);
      Thread.interrupted(); // clears an interrupt the body did not consume
    }
  }

  /** "SimpleClassName: message", what every SDK answers for a handler's exception. */
  static String describe(Throwable e) {
    String name = e.getClass().getSimpleName();
    if (name.isEmpty()) {
      name = e.getClass().getName();
    }
    return e.getMessage() == null ? name : name + ": " + e.getMessage();
  }

  private <T> void unimplemented(StreamObserver<T> out, String call) {
    out.onError(
        Status.UNIMPLEMENTED
            .withDescription("plugin " + info.name() + " does not implement " + call)
            .asException());
  }

  private static <T> void answer(StreamObserver<T> out, T response) {
    if (out instanceof ServerCallStreamObserver<T> call && call.isCancelled()) {
      return; // the operator gave up on the call (its deadline passed): nobody reads the answer
    }
    out.onNext(response);
    out.onCompleted();
  }
}
