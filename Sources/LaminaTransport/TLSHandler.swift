import NIOConcurrencyHelpers
import NIOCore

/// Fired inbound by ``TLSHandler`` once the handshake has succeeded (ALPN h2 agreed).
public struct TLSHandshakeCompleted: Sendable {
    public var info: TLSConnectionInfo
}

/// TLS over OpenSSL for one channel, server or client role: ciphertext below,
/// plaintext `ByteBuffer`s above. Application writes wait until the handshake is done.
/// Failures are fired as ``TransportError`` and close the channel.
final class TLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State { case idle, handshaking, active, closing, closed }

    private let tlsContext: TLSContext
    private let serverHostname: String?
    private var connection: TLSConnection?
    private var state: State = .idle
    private var buffered = CircularBuffer<(ByteBuffer, EventLoopPromise<Void>?)>(initialCapacity: 0)
    private var writePromises: [EventLoopPromise<Void>] = []
    private var handshakeTimeout: Scheduled<Void>?
    private(set) var info: TLSConnectionInfo?

    init(context: TLSContext, serverHostname: String? = nil) {
        self.tlsContext = context
        self.serverHostname = serverHostname
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        handshakeTimeout?.cancel()
        connection = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard state == .idle else { return }
        do {
            connection = try TLSConnection(
                context: tlsContext, serverHostname: serverHostname, allocator: context.channel.allocator)
        } catch let error as TransportError {
            fail(context: context, error)
            return
        } catch {
            fail(context: context, TransportError(.tlsFailure, "\(error)"))
            return
        }
        state = .handshaking
        let timeout = tlsContext.configuration.handshakeTimeout
        let channel = context.channel
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        handshakeTimeout = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            guard handler.state == .handshaking else { return }
            handler.fail(
                context: context, TransportError(.handshakeTimeout, "TLS handshake took longer than \(timeout)"))
            _ = channel
        }
        if tlsContext.configuration.role == .client { advance(context: context) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        guard let connection, state != .closed else { return }
        connection.feed(&buffer)
        advance(context: context)
    }

    /// Runs the handshake and/or decrypts everything buffered, then sends what OpenSSL produced.
    private func advance(context: ChannelHandlerContext) {
        guard let connection else { return }
        if state == .handshaking {
            switch connection.handshake() {
            case .wantRead:
                flushCiphertext(context: context)
                return
            case .done:
                if let error = connection.verifyAfterHandshake() {
                    fail(context: context, error)
                    return
                }
                state = .active
                handshakeTimeout?.cancel()
                handshakeTimeout = nil
                let info = connection.info
                self.info = info
                flushCiphertext(context: context)
                context.fireUserInboundEventTriggered(TLSHandshakeCompleted(info: info))
                writeBuffered(context: context)
            case .closed:
                fail(context: context, TransportError(.tlsHandshake, "the peer closed during the TLS handshake"))
                return
            case .failed(let error):
                fail(context: context, error)
                return
            }
        }
        guard state == .active || state == .closing, connection.hasInbound else {
            flushCiphertext(context: context)
            return
        }
        var plaintext = context.channel.allocator.buffer(capacity: max(connection.inboundReadable, 2048))
        let step = connection.read(into: &plaintext)
        flushCiphertext(context: context)
        if plaintext.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(plaintext)) }
        switch step {
        case .done, .wantRead: break
        case .closed:
            // close_notify from the peer: answer with ours and close.
            if state == .active {
                state = .closing
                connection.shutdown()
                flushCiphertext(context: context)
            }
            state = .closed
            context.close(promise: nil)
        case .failed(let error):
            fail(context: context, error)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        handshakeTimeout?.cancel()
        if state == .handshaking || state == .idle {
            context.fireErrorCaught(TransportError(.tlsHandshake, "the connection closed during the TLS handshake"))
        }
        state = .closed
        failBuffered(TransportError(.connectionClosed, "the connection closed"))
        context.fireChannelInactive()
    }

    // MARK: outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        writePlaintext(context: context, unwrapOutboundIn(data), promise: promise)
    }

    private func writePlaintext(context: ChannelHandlerContext, _ buffer: ByteBuffer, promise: EventLoopPromise<Void>?)
    {
        switch state {
        case .idle, .handshaking:
            buffered.append((buffer, promise))
        case .active:
            if let error = connection?.write(buffer) {
                promise?.fail(error)
                fail(context: context, error)
                return
            }
            if let promise { writePromises.append(promise) }
        case .closing, .closed:
            promise?.fail(TransportError(.connectionClosed, "the TLS connection is closing"))
        }
    }

    func flush(context: ChannelHandlerContext) {
        if state == .active { flushCiphertext(context: context) }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, state == .active, let connection else {
            if mode == .all { state = .closed }
            context.close(mode: mode, promise: promise)
            return
        }
        state = .closing
        connection.shutdown()
        let channel = context.channel
        let written = context.eventLoop.makePromise(of: Void.self)
        flushCiphertext(context: context, extra: written)
        state = .closed
        // A peer that reads nothing never takes the close_notify: close anyway after a bound.
        let once = NIOLockedValueBox(false)
        let close: @Sendable () -> Void = {
            guard
                !once.withLockedValue({ done in
                    defer { done = true }
                    return done
                })
            else { return }
            channel.close(mode: .all, promise: promise)
        }
        let bound = context.eventLoop.scheduleTask(in: Self.closeNotifyTimeout) { close() }
        written.futureResult.whenComplete { _ in
            bound.cancel()
            close()
        }
    }

    /// How long a close waits for its close_notify to be written before closing regardless.
    static let closeNotifyTimeout: TimeAmount = .seconds(2)

    private func flushCiphertext(context: ChannelHandlerContext, extra: EventLoopPromise<Void>? = nil) {
        var promises = writePromises
        writePromises.removeAll(keepingCapacity: true)
        if let extra { promises.append(extra) }
        guard let ciphertext = connection?.takeOutbound() else {
            for promise in promises { promise.succeed() }
            return
        }
        var combined: EventLoopPromise<Void>? = nil
        if promises.count == 1 {
            combined = promises[0]
        } else if promises.count > 1 {
            let all = context.eventLoop.makePromise(of: Void.self)
            for promise in promises { all.futureResult.cascade(to: promise) }
            combined = all
        }
        TransportOutputCounters.countSocketWrite()
        context.writeAndFlush(wrapOutboundOut(ciphertext), promise: combined)
    }

    private func writeBuffered(context: ChannelHandlerContext) {
        guard !buffered.isEmpty else { return }
        while let (buffer, promise) = buffered.popFirst() {
            writePlaintext(context: context, buffer, promise: promise)
        }
        flushCiphertext(context: context)
    }

    private func failBuffered(_ error: TransportError) {
        while let (_, promise) = buffered.popFirst() { promise?.fail(error) }
        let promises = writePromises
        writePromises.removeAll()
        for promise in promises { promise.fail(error) }
    }

    private func fail(context: ChannelHandlerContext, _ error: TransportError) {
        guard state != .closed else { return }
        state = .closed
        handshakeTimeout?.cancel()
        flushCiphertext(context: context)  // alerts
        failBuffered(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }
}
