package io.kplug.bench;

import io.grpc.BindableService;
import io.grpc.Server;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;

/**
 * Serves a bare grpc-java service on the Unix socket {@code $KPLUG_BENCH_SOCKET}, over Netty's
 * epoll transport (the one grpc-java serves Unix sockets with), as {@link BareEcho} and {@link
 * BareJsonEcho} do. The event loops are the SDK's: one boss thread, Netty's default number of
 * workers, and grpc-java's default executor for the calls.
 */
final class BareServer {
  private BareServer() {}

  /** Serves {@code service} until the JVM is stopped (SIGTERM or SIGINT ends it). */
  static void serve(String name, BindableService service) throws IOException, InterruptedException {
    String socket = System.getenv("KPLUG_BENCH_SOCKET");
    if (socket == null || socket.isEmpty()) {
      System.err.println(name + ": set KPLUG_BENCH_SOCKET to the Unix socket to serve on");
      System.exit(1);
    }
    Server server =
        NettyServerBuilder.forAddress(new DomainSocketAddress(socket))
            .channelType(EpollServerDomainSocketChannel.class)
            // TCP keepalive, which gRPC sets, means nothing on a Unix socket (Netty warns).
            .withChildOption(ChannelOption.SO_KEEPALIVE, null)
            .bossEventLoopGroup(new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory()))
            .workerEventLoopGroup(new MultiThreadIoEventLoopGroup(EpollIoHandler.newFactory()))
            .addService(service)
            .build()
            .start();
    server.awaitTermination();
  }
}
