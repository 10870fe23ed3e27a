import Foundation
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Connects one HTTP/2 sync stream (`POST /v1/sync`, SPEC §1) to one session.
///
/// Inbound: DATA chunks go through a ``FrameDecoder`` straight into the session on the
/// stream's event loop (no hop per frame). A decoding error goes to the session
/// (`receiveFailed`), which answers with a fatal ERROR and closes; further bytes are ignored.
///
/// Outbound (``SessionOutbound``, callable from any thread): frames are encoded into one
/// pending buffer, written once per event-loop turn. Queued bytes (pending plus written but
/// not yet taken by HTTP/2 framing) are bounded by ``SyncStreamLimits/maxOutboundBytes``;
/// past it the client is a slow consumer and the stream is reset.
///
/// Inbound backpressure: while more than ``SyncStreamLimits/maxUnansweredFrames`` frames
/// wait for their answer (ACK, ERROR, WELCOME, NONCE, AUTHENTICATED, PONG), the stream stops
/// reading and HTTP/2 flow control stalls the client.
///
/// Idle timeout: no inbound frame for ``SyncStreamLimits/idleTimeoutSeconds`` closes the stream.
public final class SyncStreamBridge: TransportStreamDelegate, SessionOutbound, @unchecked Sendable {
    private let stream: TransportStream
    private let eventLoop: EventLoop
    private let limits: SyncStreamLimits
    private let metrics: ServerMetrics
    private let logger: Logger

    // Event loop only.
    private var endpoint: SyncSessionEndpoint?
    private var decoder: FrameDecoder
    private var inboundStopped = false
    private var endpointClosed = false
    private var paused = false
    private var lastInbound: NIODeadline
    private var idleTask: Scheduled<Void>?
    private var graceTask: Scheduled<Void>?
    private var inboundAwaitingAnswer = 0

    // Guarded by `lock` (touched by `send`/`close` from any thread).
    private let lock = NIOLock()
    private var pending = ByteBuffer()
    private var flushScheduled = false
    private var outboundClosed = false
    private var finishAfterFlush = false
    private var answersSent = 0

    init(stream: TransportStream, limits: SyncStreamLimits, metrics: ServerMetrics, logger: Logger) {
        self.stream = stream
        self.eventLoop = stream.eventLoop
        self.limits = limits
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "stream"] = "\(stream.id)"
        if let remote = stream.remoteAddress { logger[metadataKey: "peer"] = "\(remote)" }
        self.logger = logger
        var wireLimits = WireLimits.default
        wireLimits.maxFrameSize = min(limits.maxFrameSize, WireLimits.protocolMaxFrameSize)
        self.decoder = FrameDecoder(limits: wireLimits)
        self.lastInbound = .now()
    }

    /// The route handler for the sync path: answers 200, opens a session through
    /// `openSession` and wires it to the stream. Non-POST requests get 405.
    public static func handler(
        limits: SyncStreamLimits, metrics: ServerMetrics, logger: Logger,
        openSession: @escaping @Sendable (SessionOutbound) -> SyncSessionEndpoint?
    ) -> TransportStreamHandler {
        return { stream in
            guard stream.method == "POST" else {
                stream.sendHeaders([(":status", "405"), ("allow", "POST")], endStream: true)
                return
            }
            let bridge = SyncStreamBridge(stream: stream, limits: limits, metrics: metrics, logger: logger)
            guard let endpoint = openSession(bridge) else {
                // The node refuses new sessions (shutting down or at its session limit).
                stream.sendHeaders([(":status", "503")], endStream: true)
                metrics.sessionsRefused.increment()
                return
            }
            bridge.start(endpoint)
        }
    }

    private func start(_ endpoint: SyncSessionEndpoint) {
        eventLoop.preconditionInEventLoop()
        self.endpoint = endpoint
        metrics.sessionsOpened.increment()
        metrics.sessionsActive.increment()
        stream.sendHeaders([(":status", "200"), ("content-type", "application/x-lamina-sync")])
        stream.delegate = self
        armIdleTimer()
        logger.debug("sync stream opened")
    }

    // MARK: inbound (event loop)

    public func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        guard !inboundStopped, let endpoint else { return }
        metrics.bytesIn.increment(by: Int64(data.readableBytes))
        decoder.feed(data)
        while !inboundStopped {
            let frame: Frame?
            do {
                frame = try decoder.next()
            } catch {
                inboundStopped = true
                metrics.decodeErrors.increment()
                logger.info("undecodable input, closing the stream", metadata: ["error": "\(error)"])
                endpoint.receiveFailed(error)
                return
            }
            guard let frame else { break }
            lastInbound = .now()
            metrics.framesIn.increment()
            if Self.expectsAnswer(frame) { inboundAwaitingAnswer += 1 }
            endpoint.receive(frame)
            if lock.withLock({ outboundClosed }) { inboundStopped = true }
        }
        updateInboundPause()
    }

    public func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        guard !inboundStopped, let endpoint else { return }
        inboundStopped = true
        do {
            try decoder.finish()
        } catch {
            metrics.decodeErrors.increment()
            endpoint.receiveFailed(error)
            return
        }
        // The client has nothing more to say: end our side after what is queued.
        logger.debug("client ended its side")
        notifyEndpointClosed()
        close(with: nil)
    }

    public func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        inboundStopped = true
        idleTask?.cancel()
        graceTask?.cancel()
        lock.withLock {
            outboundClosed = true
            pending = ByteBuffer()
        }
        if let error { logger.debug("sync stream closed", metadata: ["error": "\(error)"]) }
        notifyEndpointClosed()
        metrics.sessionsActive.decrement()
    }

    private func notifyEndpointClosed() {
        guard !endpointClosed else { return }
        endpointClosed = true
        endpoint?.closed()
    }

    /// Frames the node answers with exactly one frame (SPEC §5, §6); TYPING and PONG get none.
    private static func expectsAnswer(_ frame: Frame) -> Bool {
        switch frame {
        case .typing, .pong: false
        default: true
        }
    }

    /// Frames that answer a client frame (counted against ``inboundAwaitingAnswer``).
    private static func isAnswer(_ frame: Frame) -> Bool {
        switch frame {
        case .welcome, .authenticated, .pong, .ack: true
        case .nonce(let nonce): nonce.requestID != UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        case .error(let error): error.requestID != nil
        default: false
        }
    }

    private func updateInboundPause() {
        let answered = lock.withLock { () -> Int in
            defer { answersSent = 0 }
            return answersSent
        }
        inboundAwaitingAnswer = max(0, inboundAwaitingAnswer - answered)
        if !paused, inboundAwaitingAnswer >= limits.maxUnansweredFrames {
            paused = true
            metrics.inboundPauses.increment()
            stream.pauseInbound()
        } else if paused, inboundAwaitingAnswer < limits.maxUnansweredFrames / 2 {
            paused = false
            stream.resumeInbound()
        }
    }

    // MARK: idle timeout (event loop)

    private func armIdleTimer() {
        let deadline = lastInbound + limits.idleTimeout
        idleTask = eventLoop.scheduleTask(deadline: deadline) { [weak self] in self?.idleCheck() }
    }

    private func idleCheck() {
        guard !stream.isClosed, !endpointClosed else { return }
        if NIODeadline.now() >= lastInbound + limits.idleTimeout {
            metrics.idleTimeouts.increment()
            logger.info("idle timeout, closing the sync stream")
            inboundStopped = true
            notifyEndpointClosed()
            close(with: nil)
        } else {
            armIdleTimer()
        }
    }

    // MARK: SessionOutbound (any thread)

    public func send(_ frames: [Frame]) {
        var overflow = false
        var schedule = false
        lock.withLock {
            guard !outboundClosed else { return }
            for frame in frames {
                do {
                    try frame.encode(into: &pending)
                } catch {
                    logger.error("cannot encode an outbound frame", metadata: ["type": "\(frame.type)", "error": "\(error)"])
                    continue
                }
                if Self.isAnswer(frame) { answersSent += 1 }
            }
            if pending.readableBytes + inFlightBytes > limits.maxOutboundBytes {
                outboundClosed = true
                overflow = true
                pending = ByteBuffer()
            } else if !flushScheduled {
                flushScheduled = true
                schedule = true
            }
        }
        if overflow {
            eventLoop.execute { self.slowConsumer() }
        } else if schedule {
            eventLoop.execute { self.flush() }
        }
    }

    public func close(with error: ErrorFrame?) {
        var schedule = false
        lock.withLock {
            guard !outboundClosed else { return }
            if let error {
                do { try Frame.error(error).encode(into: &pending) } catch {
                    logger.error("cannot encode the closing error frame", metadata: ["error": "\(error)"])
                }
            }
            outboundClosed = true
            finishAfterFlush = true
            if !flushScheduled {
                flushScheduled = true
                schedule = true
            }
        }
        if schedule { eventLoop.execute { self.flush() } }
    }

    // Bytes written to the stream whose write promise has not completed (guarded by `lock`).
    private var inFlightBytes = 0

    private func flush() {
        eventLoop.preconditionInEventLoop()
        let (buffer, finish) = lock.withLock { () -> (ByteBuffer, Bool) in
            flushScheduled = false
            let buffer = pending
            pending = ByteBuffer()
            inFlightBytes += buffer.readableBytes
            let finish = finishAfterFlush
            finishAfterFlush = false
            return (buffer, finish)
        }
        let count = buffer.readableBytes
        if count > 0 {
            metrics.bytesOut.increment(by: Int64(count))
            let promise = eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenComplete { _ in
                self.lock.withLock { self.inFlightBytes -= count }
            }
            stream.write(buffer, promise: promise)
        }
        if finish {
            inboundStopped = true
            stream.finish()
            scheduleGraceReset()
        }
        if paused { updateInboundPause() }
    }

    private func scheduleGraceReset() {
        guard graceTask == nil else { return }
        graceTask = eventLoop.scheduleTask(in: .seconds(Int64(limits.closeGraceSeconds))) { [weak self] in
            guard let self, !self.stream.isClosed else { return }
            self.stream.reset(code: 0)  // NO_ERROR: we are done, the client did not end its side
        }
    }

    private func slowConsumer() {
        metrics.slowConsumers.increment()
        logger.warning(
            "slow consumer: outbound queue over its bound, resetting the stream",
            metadata: ["maxOutboundBytes": "\(limits.maxOutboundBytes)"])
        inboundStopped = true
        notifyEndpointClosed()
        stream.reset(code: 0xB)  // ENHANCE_YOUR_CALM
    }
}
