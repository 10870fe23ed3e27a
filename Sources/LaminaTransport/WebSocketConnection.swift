import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket

/// What a ``WebSocketConnection`` tells its user, on the connection's event loop, in order.
public protocol WebSocketConnectionDelegate: AnyObject, Sendable {
    /// A whole text message from the client (fragments joined, UTF-8 checked).
    func webSocket(_ connection: WebSocketConnection, received text: String)
    /// The connection is closed (always last, once). `code`: the close code exchanged
    /// (sent or received), nil when the socket closed without one.
    func webSocketClosed(_ connection: WebSocketConnection, code: WebSocketErrorCode?, reason: String)
}

/// Where a ``WebSocketConnection`` reports its queued outbound bytes (e.g. a node-wide budget
/// shared with other kinds of streams). Called from any thread, under the connection's lock:
/// must not block.
public protocol WebSocketOutboundAccount: Sendable {
    /// The connection's queued bytes changed by `delta` (negative: written out) to `queued`.
    /// True on a growth closes the connection as a slow consumer (1008).
    func queuedBytesChanged(by delta: Int, queued: Int) -> Bool
    /// The connection closed; every byte it reported has been reported gone. Called once.
    func closed()
}

/// One accepted WebSocket (RFC 6455 framing by NIOWebSocket).
///
/// Inbound: text messages go to the delegate in order; a binary message closes with 1003,
/// invalid UTF-8 with 1007, a frame over ``WebSocketSettings/maxFrameBytes`` or a message over
/// ``WebSocketSettings/maxMessageBytes`` with 1009. PINGs are answered; after
/// ``WebSocketSettings/pingAfterQuietSeconds`` without a frame the server sends a PING, and
/// after ``WebSocketSettings/idleTimeoutSeconds`` without one it closes with 1001.
///
/// Outbound (callable from any thread): ``send(text:)`` queues a message; the messages queued
/// in one event-loop turn are written with one flush. Bytes queued and not yet written to the
/// socket are bounded by ``WebSocketSettings/maxOutboundBytes``: past it the client is a slow
/// reader and the connection is closed with 1008 (`slow consumer`); the same happens when the
/// ``WebSocketOutboundAccount`` given to ``account(with:)`` answers so. ``waitForRoom(below:)``
/// lets a producer of a large answer go at the client's pace instead.
///
/// The delegate is held until the connection closes, then released.
public final class WebSocketConnection: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    public typealias InboundIn = WebSocketFrame
    public typealias OutboundOut = WebSocketFrame

    /// The upgrade request (path, query, headers, remote address).
    public let request: WebSocketUpgradeRequest
    /// The subprotocol agreed in the handshake, if any.
    public let subprotocol: String?
    /// The loop the connection's callbacks run on.
    public let eventLoop: EventLoop
    /// The route's limits.
    public let settings: WebSocketSettings

    // Event loop only.
    /// Receives the connection's messages; set it in the route's `opened` callback.
    public var delegate: WebSocketConnectionDelegate?
    private var context: ChannelHandlerContext?
    private var lastInbound = NIODeadline.now()
    private var pingSent: NIODeadline?
    private var timer: Scheduled<Void>?
    private var closeSent = false
    private var closeCode: WebSocketErrorCode?
    private var closeReason = ""
    private var notified = false

    // Guarded by `lock` (``send(text:)`` and ``close(code:reason:)`` come from any thread).
    private let lock = NIOLock()
    private var pending: [ByteBuffer] = []
    private var queued = 0
    private var flushScheduled = false
    private var outboundClosed = false
    private var roomWaiters: [(limit: Int, continuation: CheckedContinuation<Bool, Never>)] = []
    private var outboundAccount: WebSocketOutboundAccount?
    private var accountingEnded = false
    /// The queued bytes last reported to `outboundAccount`.
    private var reported = 0

    init(request: WebSocketUpgradeRequest, subprotocol: String?, settings: WebSocketSettings, eventLoop: EventLoop) {
        self.request = request
        self.subprotocol = subprotocol
        self.settings = settings
        self.eventLoop = eventLoop
    }

    /// The client's address.
    public var remoteAddress: SocketAddress? { request.remoteAddress }

    /// Bytes queued for the client and not yet written to its socket.
    public var queuedBytes: Int { lock.withLock { queued } }

    /// Whether the outbound side still takes messages.
    public var isOpen: Bool { lock.withLock { !outboundClosed } }

    // MARK: outbound (any thread)

    /// Reports the connection's queued bytes to `account` from now on (set it before the first
    /// message, e.g. in the route's `opened` callback); `account.closed()` comes when the
    /// connection closes (at once if it already has).
    public func account(with account: WebSocketOutboundAccount) {
        let open = lock.withLock { () -> Bool in
            guard !accountingEnded else { return false }
            outboundAccount = account
            reported = 0
            _ = report()
            return true
        }
        if !open { account.closed() }
    }

    /// Tells the account how the queue changed since the last report (under `lock`); true when
    /// it answers that this connection is over its share.
    private func report() -> Bool {
        guard let outboundAccount else { return false }
        let now = queued
        defer { reported = now }
        return outboundAccount.queuedBytesChanged(by: now - reported, queued: now)
    }

    /// Reports every reported byte gone and the account closed (once, when the socket closes).
    private func endAccounting() {
        let account = lock.withLock { () -> WebSocketOutboundAccount? in
            accountingEnded = true
            defer { outboundAccount = nil }
            if let outboundAccount, reported != 0 {
                _ = outboundAccount.queuedBytesChanged(by: -reported, queued: 0)
                reported = 0
            }
            return outboundAccount
        }
        account?.closed()
    }

    /// Queues a text message. Over ``WebSocketSettings/maxOutboundBytes`` queued, the
    /// connection is closed with 1008 instead (slow consumer). Ignored once closing.
    public func send(text: String) {
        send(message: ByteBuffer(string: text))
    }

    /// Queues a text message given as its UTF-8 bytes (the caller's to make valid UTF-8), as
    /// ``send(text:)`` does.
    public func send(utf8 bytes: [UInt8]) {
        send(message: ByteBuffer(bytes: bytes))
    }

    private func send(message buffer: ByteBuffer) {
        var overflow = false
        var schedule = false
        var waiters: [CheckedContinuation<Bool, Never>] = []
        lock.withLock {
            guard !outboundClosed else { return }
            if queued + buffer.readableBytes > settings.maxOutboundBytes {
                overflow = true
                outboundClosed = true
                pending = []
                waiters = takeWaiters()
                return
            }
            pending.append(buffer)
            queued += buffer.readableBytes
            if report() {
                overflow = true
                outboundClosed = true
                pending = []
                waiters = takeWaiters()
                return
            }
            if !flushScheduled {
                flushScheduled = true
                schedule = true
            }
        }
        for waiter in waiters { waiter.resume(returning: false) }
        if overflow {
            eventLoop.execute {
                self.sendClose(
                    code: .policyViolation,
                    reason:
                        "slow consumer: more than \(self.settings.maxOutboundBytes) bytes queued, or over its share of the node's outbound budget"
                )
            }
        } else if schedule {
            eventLoop.execute { self.flush() }
        }
    }

    /// Sends CLOSE with `code` and `reason` (cut to 123 bytes) after the queued messages and
    /// closes the socket once the client answers (or after ``WebSocketSettings/closeGraceSeconds``).
    public func close(code: WebSocketErrorCode = .normalClosure, reason: String = "") {
        eventLoop.execute {
            self.flush()
            self.sendClose(code: code, reason: reason)
        }
    }

    /// Returns once at most `limit` bytes are queued (true), or the connection closed (false).
    public func waitForRoom(below limit: Int) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let now = lock.withLock { () -> Bool? in
                if outboundClosed { return false }
                if queued <= limit { return true }
                roomWaiters.append((limit, continuation))
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Stops reading from the socket (TCP then stalls the client) until ``resumeInbound()``.
    public func pauseInbound() {
        eventLoop.execute { _ = self.context?.channel.setOption(ChannelOptions.autoRead, value: false) }
    }

    /// Reads from the socket again.
    public func resumeInbound() {
        eventLoop.execute {
            guard let context = self.context else { return }
            _ = context.channel.setOption(ChannelOptions.autoRead, value: true)
            context.read()
        }
    }

    private func takeWaiters() -> [CheckedContinuation<Bool, Never>] {
        defer { roomWaiters = [] }
        return roomWaiters.map(\.continuation)
    }

    private func flush() {
        eventLoop.preconditionInEventLoop()
        let batch = lock.withLock { () -> [ByteBuffer] in
            flushScheduled = false
            defer { pending = [] }
            return pending
        }
        guard let context, !batch.isEmpty, !closeSent else { return }
        var size = 0
        for (index, buffer) in batch.enumerated() {
            size += buffer.readableBytes
            let frame = wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: buffer))
            guard index == batch.count - 1 else {
                context.write(frame, promise: nil)
                continue
            }
            // The last write completes after the others: the batch has left then.
            let total = size
            context.writeAndFlush(frame).whenComplete { _ in self.taken(total) }
        }
    }

    private func taken(_ count: Int) {
        let ready = lock.withLock { () -> [CheckedContinuation<Bool, Never>] in
            queued -= count
            _ = report()
            let (ready, waiting) = (roomWaiters.filter { queued <= $0.limit }, roomWaiters.filter { queued > $0.limit })
            roomWaiters = waiting
            return ready.map(\.continuation)
        }
        for waiter in ready { waiter.resume(returning: true) }
    }

    // MARK: channel events (event loop)

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        lastInbound = .now()
        arm(at: lastInbound + settings.pingAfterQuiet)
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        self.context = nil
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastInbound = .now()
        switch frame.opcode {
        case .text:
            guard !closeSent else { return }
            let payload = frame.unmaskedData
            guard let text = String(validating: payload.readableBytesView, as: UTF8.self) else {
                return sendClose(code: .dataInconsistentWithMessage, reason: "a text message is not valid UTF-8")
            }
            delegate?.webSocket(self, received: text)
        case .binary:
            guard !closeSent else { return }
            sendClose(code: .unacceptableData, reason: "binary messages are not accepted")
        case .ping:
            guard !closeSent else { return }
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            var payload = frame.unmaskedData
            let code = payload.readWebSocketErrorCode()
            if closeSent {
                context.close(promise: nil)
                return
            }
            closeCode = code
            closeReason = payload.readString(length: payload.readableBytes) ?? ""
            closeSent = true
            closeOutbound()
            var echo = context.channel.allocator.buffer(capacity: 2)
            if let code { echo.write(webSocketErrorCode: code) }
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: echo)))
                .whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    public func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let error = error as? NIOWebSocketError {
            // NIOWebSocket's protocol-error handler already sent CLOSE and is closing.
            closeSent = true
            closeCode = error == .invalidFrameLength ? .messageTooLarge : .protocolError
            closeReason = "\(error)"
            closeOutbound()
        } else if let error = error as? NIOWebSocketFrameAggregator.Error {
            switch error {
            case .accumulatedFrameSizeIsTooLarge, .tooManyFragments:
                sendClose(
                    code: .messageTooLarge,
                    reason: "a message is over \(settings.maxMessageBytes) bytes or \(settings.maxFragments) fragments")
            default:
                sendClose(code: .protocolError, reason: "bad fragmentation")
            }
        } else {
            closeOutbound()
            context.close(promise: nil)
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        closeOutbound()
        endAccounting()
        if !notified {
            notified = true
            let delegate = self.delegate
            self.delegate = nil
            delegate?.webSocketClosed(self, code: closeCode, reason: closeReason)
        }
        context.fireChannelInactive()
    }

    // MARK: closing (event loop)

    private func sendClose(code: WebSocketErrorCode, reason: String) {
        eventLoop.preconditionInEventLoop()
        guard !closeSent, let context else { return }
        closeSent = true
        closeCode = code
        closeReason = reason
        closeOutbound()
        var payload = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        payload.write(webSocketErrorCode: code)
        payload.writeBytes(reason.utf8.prefix(123))
        context.writeAndFlush(
            wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload)), promise: nil)
        let channel = context.channel
        timer?.cancel()
        timer = eventLoop.scheduleTask(in: settings.closeGrace) { channel.close(promise: nil) }
    }

    /// No more outbound messages; waiting producers are told.
    private func closeOutbound() {
        let waiters = lock.withLock { () -> [CheckedContinuation<Bool, Never>] in
            outboundClosed = true
            pending = []
            return takeWaiters()
        }
        for waiter in waiters { waiter.resume(returning: false) }
    }

    // MARK: keepalive (event loop)

    private func arm(at deadline: NIODeadline) {
        timer?.cancel()
        timer = eventLoop.scheduleTask(deadline: deadline) { [weak self] in self?.livenessCheck() }
    }

    private func livenessCheck() {
        guard !closeSent, let context else { return }
        let now = NIODeadline.now()
        if now >= lastInbound + settings.idleTimeout {
            return sendClose(code: .goingAway, reason: "no frame for \(settings.idleTimeoutSeconds) s")
        }
        if now >= lastInbound + settings.pingAfterQuiet {
            if pingSent.map({ $0 < lastInbound }) ?? true {
                pingSent = now
                context.writeAndFlush(
                    wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "lamina"))),
                    promise: nil)
            }
            arm(at: lastInbound + settings.idleTimeout)
        } else {
            arm(at: lastInbound + settings.pingAfterQuiet)
        }
    }
}
