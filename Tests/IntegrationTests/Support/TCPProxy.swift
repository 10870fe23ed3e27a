import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP forwarder on 127.0.0.1 to `target`, for partition tests: ``cut()`` closes every
/// forwarded connection and refuses new ones until ``heal()``.
final class TCPProxy: Sendable {
    private let listener: Channel
    private let state: NIOLockedValueBox<(cut: Bool, channels: [Channel])>

    var port: Int { listener.localAddress!.port! }

    private init(listener: Channel, state: NIOLockedValueBox<(cut: Bool, channels: [Channel])>) {
        self.listener = listener
        self.state = state
    }

    static func start(to targetPort: Int, group: EventLoopGroup = Fixtures.group) async throws -> TCPProxy {
        let state = NIOLockedValueBox<(cut: Bool, channels: [Channel])>((false, []))
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                guard !state.withLockedValue({ $0.cut }) else { return inbound.close() }
                return ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.pipeline.addHandler(Forward(to: inbound))
                    }
                    .connect(host: "127.0.0.1", port: targetPort)
                    .flatMap { outbound in
                        state.withLockedValue { $0.channels += [inbound, outbound] }
                        return inbound.pipeline.addHandler(Forward(to: outbound))
                    }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TCPProxy(listener: listener, state: state)
    }

    /// Closes every forwarded connection; new ones are closed at once until ``heal()``.
    func cut() {
        let channels = state.withLockedValue { s -> [Channel] in
            s.cut = true
            defer { s.channels = [] }
            return s.channels
        }
        for channel in channels { channel.close(promise: nil) }
    }

    func heal() { state.withLockedValue { $0.cut = false } }

    func stop() async {
        cut()
        try? await listener.close()
    }
}

/// Writes what one side reads to the other; closing one closes both.
private final class Forward: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private let other: Channel
    init(to other: Channel) { self.other = other }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        other.writeAndFlush(unwrapInboundIn(data), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        other.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
