package io.kplug.sidecar;

import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import kplug.v1.RegistryGrpc;
import kplug.v1.RegistryOuterClass.HeartbeatRequest;
import kplug.v1.RegistryOuterClass.HeartbeatResponse;
import kplug.v1.RegistryOuterClass.UnregisterRequest;
import kplug.v1.RegistryOuterClass.UnregisterResponse;

/**
 * A stand-in for the operator's registry on {@code <dir>/registry.sock}, over a real Unix socket:
 * it records heartbeats (with when they came) and Unregister calls, answers as told, and can fail
 * the first heartbeats or hold its answer to Unregister.
 */
final class FakeRegistry implements AutoCloseable {
  record Beat(long nanos, HeartbeatRequest request) {}

  private final EventLoopGroup group =
      new MultiThreadIoEventLoopGroup(2, EpollIoHandler.newFactory());
  private final Server server;
  private final List<Beat> beats = new ArrayList<>();
  private final List<UnregisterRequest> unregisters = new ArrayList<>();
  private volatile boolean accepted = true;
  private volatile String reason = "";
  private volatile Duration interval;
  private volatile int failFirst;
  private volatile CountDownLatch holdUnregister;
  private final CountDownLatch unregisterArrived = new CountDownLatch(1);

  FakeRegistry(Path dir) throws IOException {
    server =
        NettyServerBuilder.forAddress(
                new DomainSocketAddress(dir.resolve("registry.sock").toString()))
            .channelType(EpollServerDomainSocketChannel.class)
            .withChildOption(ChannelOption.SO_KEEPALIVE, null)
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group)
            .addService(new Service())
            .build()
            .start();
  }

  /** How to answer the next heartbeats. */
  void answer(boolean accepted, String reason, Duration interval) {
    this.accepted = accepted;
    this.reason = reason;
    this.interval = interval;
  }

  /** Fails the next {@code n} heartbeats with UNAVAILABLE. */
  void failFirst(int n) {
    failFirst = n;
  }

  /** Holds the answer to Unregister until {@code release} counts down. */
  void holdUnregister(CountDownLatch release) {
    holdUnregister = release;
  }

  synchronized List<Beat> beats() {
    return List.copyOf(beats);
  }

  synchronized List<UnregisterRequest> unregisters() {
    return List.copyOf(unregisters);
  }

  /** Waits until {@code n} heartbeats came (failed ones included), or fails. */
  List<Beat> awaitBeats(int n, Duration timeout) throws InterruptedException {
    long until = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < until) {
      List<Beat> now = beats();
      if (now.size() >= n) {
        return now;
      }
      Thread.sleep(10);
    }
    throw new AssertionError(
        n + " heartbeats did not come within " + timeout + ": " + beats().size());
  }

  boolean awaitUnregister(Duration timeout) throws InterruptedException {
    return unregisterArrived.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  @Override
  public void close() throws InterruptedException {
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    group.shutdownGracefully(0, 0, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS);
  }

  private final class Service extends RegistryGrpc.RegistryImplBase {
    @Override
    public void heartbeat(HeartbeatRequest request, StreamObserver<HeartbeatResponse> out) {
      synchronized (FakeRegistry.this) {
        beats.add(new Beat(System.nanoTime(), request));
        if (failFirst > 0) {
          failFirst--;
          out.onError(Status.UNAVAILABLE.withDescription("not yet").asException());
          return;
        }
      }
      var response = HeartbeatResponse.newBuilder().setAccepted(accepted).setReason(reason);
      response.setTtl(Durations.toProto(Duration.ofSeconds(15)));
      if (interval != null) {
        response.setInterval(Durations.toProto(interval));
      }
      out.onNext(response.build());
      out.onCompleted();
    }

    @Override
    public void unregister(UnregisterRequest request, StreamObserver<UnregisterResponse> out) {
      synchronized (FakeRegistry.this) {
        unregisters.add(request);
      }
      unregisterArrived.countDown();
      CountDownLatch hold = holdUnregister;
      if (hold != null) {
        try {
          hold.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      out.onNext(UnregisterResponse.newBuilder().setRemoved(true).build());
      out.onCompleted();
    }
  }
}
