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
/// Paced answers: a large answer (history, SYNC backlog) waits in ``roomForPacedAnswer()``
/// before each frame until at most ``SyncStreamLimits/pacedAnswerQueueBytes`` are queued, so it
/// is produced as the client reads. While it waits, a client that takes no byte for
/// ``SyncStreamLimits/stalledReaderTimeoutSeconds`` is reset (slow consumer); a client that
/// reads, however slowly, is not, and its stream is not idle meanwhile. An answer waiting for
/// a lease of the node's ``AnswerBudget`` holds nothing queued of its own: it is reset when its
/// connection holds output for the client and the client read none of it (no WINDOW_UPDATE,
/// no socket progress) for the stall timeout, so streams that never read are all cut within
/// the timeout, not one round of leases after another.
///
/// Inbound backpressure: while more than ``SyncStreamLimits/maxUnansweredFrames`` frames
/// wait for their answer (ACK, ERROR, WELCOME, NONCE, AUTHENTICATED, PONG), the stream stops
/// reading and HTTP/2 flow control stalls the client.
///
/// Idle timeout: no inbound frame for ``SyncStreamLimits/idleTimeoutSeconds`` closes the stream.
///
/// Before authentication (until an AUTHENTICATED frame goes out) the stream accepts frames of
/// at most ``SyncStreamLimits/unauthenticatedMaxFrameSize``, holds a ``SessionAdmission``
/// ticket, and must authenticate within ``SyncStreamLimits/authenticationTimeoutSeconds``
/// of wall time.
///
/// Lifetime: the session holds this bridge (its outbound) and the bridge holds the session
/// (its endpoint) while the stream is open. The bridge lets go of the session, its decoder's
/// buffered bytes and its ticket as soon as the session is told the transport closed, so both
/// are freed once the stream is (`Server/RESOURCES.md`).
///
/// A client's ERROR frame (SPEC §5.6: either side may send one) is logged and not passed on;
/// a fatal one ends the session as the client's END_STREAM does.
public final class SyncStreamBridge: TransportStreamDelegate, SessionOutbound, @unchecked Sendable {
    private let stream: TransportStream
    private let eventLoop: EventLoop
    private let limits: SyncStreamLimits
    private let metrics: ServerMetrics
    private let logger: Logger
    private let admission: SessionAdmission?
    /// Writes this bridge's frames in its event loop's flush task, with other streams'.
    private let flusher: SyncOutboundFlusher

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
    private var authenticated = false
    private var started = false
    private var opened = NIODeadline.now()
    private var authenticationTask: Scheduled<Void>?
    private var ticket: SessionAdmission.Ticket?

    // Guarded by `lock` (touched by `send`/`close` from any thread).
    private let lock = NIOLock()
    private var pending = ByteBuffer()
    private var flushScheduled = false
    private var outboundClosed = false
    private var finishAfterFlush = false
    private var answersSent = 0
    /// An AUTHENTICATED frame is in `pending` (the decoder's limit rises before it is written).
    private var authenticatedQueued = false
    /// A paced answer waiting for the queue to shrink (at most one: the session's inbox task).
    private var roomWaiters: [CheckedContinuation<Bool, Never>] = []
    /// The queue the waiting answer waits for (`pacedAnswerQueueBytes`, or a drained queue).
    private var roomThreshold = 0
    /// When the transport last took queued bytes (the client's reading made room).
    private var lastDrain = NIODeadline.now()
    /// When a paced answer last asked for room (its frames are not inbound activity).
    private var lastPacedFrame = NIODeadline.uptimeNanoseconds(0)
    /// The node's outbound budget, and the queued bytes last reported to it (under `lock`).
    private let budget: NodeOutboundBudget?
    private var reportedBytes = 0
    // Event loop only: the check for a reader that stopped while a paced answer waits.
    private var stallTask: Scheduled<Void>?
    // Event loop only: an answer waiting for a lease of the node's answer budget, since when,
    // its check, and since when (first seen during the wait) the connection held output for
    // the client.
    private var leaseWaitSince: NIODeadline?
    private var leaseStallTask: Scheduled<Void>?
    private var outputHeldSince: NIODeadline?
    /// The connection read nothing since `since` when the answer got its lease (`at`): the
    /// stall clock of its first wait for room, if within a stall timeout, starts there, not
    /// anew (under `lock`).
    private var carriedStall: (since: NIODeadline, at: NIODeadline)?

    init(
        stream: TransportStream, limits: SyncStreamLimits, metrics: ServerMetrics, logger: Logger,
        admission: SessionAdmission? = nil, budget: NodeOutboundBudget? = nil
    ) {
        self.stream = stream
        self.budget = budget
        self.eventLoop = stream.eventLoop
        self.flusher = SyncOutboundFlusher.flusher(for: stream.eventLoop)
        self.limits = limits
        self.metrics = metrics
        self.admission = admission
        var logger = logger
        logger[metadataKey: "stream"] = "\(stream.id)"
        if let remote = stream.remoteAddress { logger[metadataKey: "peer"] = "\(remote)" }
        self.logger = logger
        self.decoder = FrameDecoder(limits: Self.wireLimits(maxFrameSize: limits.unauthenticatedFrameLimit))
        self.lastInbound = .now()
        admission?.bridgeCreated()
    }

    deinit {
        admission?.bridgeReleased()
    }

    private static func wireLimits(maxFrameSize: Int) -> WireLimits {
        var wireLimits = WireLimits.default
        wireLimits.maxFrameSize = min(maxFrameSize, WireLimits.protocolMaxFrameSize)
        return wireLimits
    }

    /// The route handler for the sync path: answers 200, opens a session through
    /// `openSession` and wires it to the stream. Non-POST requests get 405. With `admission`,
    /// a stream over an unauthenticated-session limit gets 200 and a fatal ERROR `overloaded`
    /// (with a retry delay) instead of a session.
    public static func handler(
        limits: SyncStreamLimits, metrics: ServerMetrics, logger: Logger, admission: SessionAdmission? = nil,
        budget: NodeOutboundBudget? = nil,
        openSession: @escaping @Sendable (SessionOutbound) -> SyncSessionEndpoint?
    ) -> TransportStreamHandler {
        return { stream in
            guard stream.method == "POST" else {
                stream.sendHeaders([(":status", "405"), ("allow", "POST")], endStream: true)
                return
            }
            let bridge = SyncStreamBridge(
                stream: stream, limits: limits, metrics: metrics, logger: logger, admission: admission, budget: budget)
            if let admission {
                switch admission.admit(connection: stream.connectionID, address: stream.remoteAddress?.ipAddress) {
                case .admitted(let ticket):
                    bridge.ticket = ticket
                case .refused(let refusal):
                    metrics.sessionsRefused.increment()
                    bridge.refuse(refusal)
                    return
                }
            }
            guard let endpoint = openSession(bridge) else {
                // The node refuses new sessions (shutting down or at its session limit).
                bridge.ticket?.release()
                bridge.ticket = nil
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
        started = true
        budget?.streamOpened()
        opened = .now()
        metrics.sessionsOpened.increment()
        metrics.sessionsActive.increment()
        stream.sendHeaders([(":status", "200"), ("content-type", "application/x-lamina-sync")])
        stream.delegate = self
        armIdleTimer()
        authenticationTask = eventLoop.scheduleTask(in: limits.authenticationTimeout) { [weak self] in
            self?.authenticationDeadline()
        }
        logger.debug("sync stream opened")
    }

    /// Answers a stream refused before it got a session: 200, the fatal ERROR, END_STREAM,
    /// then a reset after the close grace if the client does not end its side.
    private func refuse(_ error: ErrorFrame) {
        eventLoop.preconditionInEventLoop()
        logger.info("sync session refused", metadata: ["reason": "\(error.reason)"])
        endpointClosed = true
        inboundStopped = true
        stream.sendHeaders([(":status", "200"), ("content-type", "application/x-lamina-sync")])
        stream.delegate = self
        close(with: error)
    }

    // MARK: inbound (event loop)

    public func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        guard !inboundStopped, endpoint != nil else { return }
        metrics.bytesIn.increment(by: Int64(data.readableBytes))
        decoder.feed(data)
        decodeFrames()
        updateInboundPause()
    }

    /// Passes decoded frames to the session while at most ``SyncStreamLimits/maxUnansweredFrames``
    /// wait for their answer and the outbound queue is within its bound; the rest of a chunk
    /// stays in the decoder until the stream resumes, so a chunk of a thousand PINGs does not
    /// put a thousand frames in the session's inbox at once. (The stream pauses at the lower
    /// unauthenticated bound after the chunk: stopping there mid-chunk would take a round trip
    /// per 8 frames.)
    private func decodeFrames() {
        // What stays in the decoder must not keep the chunk's plaintext buffer alive.
        defer { decoder.detach() }
        while !inboundStopped, let endpoint, !overInboundBounds(unanswered: limits.maxUnansweredFrames) {
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
            if case .error(let error) = frame { clientError(error) }
            if Self.expectsAnswer(frame) { inboundAwaitingAnswer += 1 }
            endpoint.receive(frame)
        }
    }

    /// Takes the answers sent since the last look; true while the stream must not take another
    /// frame: `limit` frames wait for their answer, or (before authentication)
    /// more than ``SyncStreamLimits/unauthenticatedMaxOutboundBytes`` wait for the client to
    /// read them. Stops the inbound side once the outbound side closed.
    private func overInboundBounds(unanswered limit: Int) -> Bool {
        let (answered, queued, closed) = lock.withLock { () -> (Int, Int, Bool) in
            defer { answersSent = 0 }
            return (answersSent, queuedBytes, outboundClosed)
        }
        if closed { inboundStopped = true }
        inboundAwaitingAnswer = max(0, inboundAwaitingAnswer - answered)
        return closed || inboundAwaitingAnswer >= limit || queued > outboundLimit
    }

    private var unansweredLimit: Int {
        // Before authentication a handful is enough (HELLO, NONCE_REQUEST, AUTHENTICATE, PINGs).
        authenticated
            ? limits.maxUnansweredFrames : min(limits.maxUnansweredFrames, limits.unauthenticatedMaxUnansweredFrames)
    }

    /// Queued outbound bytes above which the stream stops reading: before authentication the
    /// answers (PONGs above all) of a client that sends faster than it reads stay small;
    /// after it the stream's own bound (a reset) applies.
    private var outboundLimit: Int {
        authenticated ? Int.max : limits.unauthenticatedMaxOutboundBytes
    }

    /// SPEC §5.6: a client may send ERROR. Logged; a fatal one ends the session (the client
    /// sends nothing more), and the node ends its side after what is queued.
    /// Counts and logs a client's ERROR; after a fatal one the client sends nothing more, so
    /// nothing after it is read. The session answers it (SPEC §5.7: before HELLO a fatal
    /// `unexpected-frame`, after it nothing, and a fatal one ends the stream).
    private func clientError(_ error: ErrorFrame) {
        metrics.clientErrors.increment()
        logger.info(
            "the client sent an ERROR",
            metadata: ["code": "\(error.code.wireValue)", "reason": "\(error.reason)", "fatal": "\(error.isFatal)"])
        if error.isFatal { inboundStopped = true }
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
        idleTask = nil
        graceTask?.cancel()
        graceTask = nil
        stallTask?.cancel()
        stallTask = nil
        leaseStallTask?.cancel()
        leaseStallTask = nil
        dropOutbound()
        if let error { logger.debug("sync stream closed", metadata: ["error": "\(error)"]) }
        notifyEndpointClosed()
        if started {
            metrics.sessionsActive.decrement()
            budget?.streamClosed()
        }
    }

    /// Tells the session the transport is gone (once), then lets go of it: the session holds
    /// this bridge as its outbound, so keeping it here would keep both alive for good.
    private func notifyEndpointClosed() {
        guard !endpointClosed else {
            releaseInbound()
            return
        }
        endpointClosed = true
        let endpoint = self.endpoint
        releaseInbound()
        endpoint?.closed()
    }

    /// Drops everything the inbound side holds: the session, the bytes of a partial frame,
    /// the unauthenticated-session ticket, the authentication deadline.
    private func releaseInbound() {
        endpoint = nil
        decoder = FrameDecoder(limits: Self.wireLimits(maxFrameSize: limits.unauthenticatedFrameLimit))
        ticket?.release()
        ticket = nil
        authenticationTask?.cancel()
        authenticationTask = nil
    }

    /// Frames the node answers with exactly one frame (SPEC §5, §6); TYPING and PONG get none.
    private static func expectsAnswer(_ frame: Frame) -> Bool {
        switch frame {
        case .typing, .pong, .error: false
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

    /// Pauses the stream while it is over its inbound bounds; resumes it once it is well below
    /// them (half the unanswered frames, half the outbound bytes), after passing on the frames
    /// the decoder still holds.
    private func updateInboundPause() {
        guard !inboundStopped else { return }
        let over = overInboundBounds(unanswered: unansweredLimit)
        if !paused, over {
            paused = true
            metrics.inboundPauses.increment()
            stream.pauseInbound()
        } else if paused, !over, inboundAwaitingAnswer < unansweredLimit / 2,
            lock.withLock({ queuedBytes }) <= outboundLimit / 2
        {
            decodeFrames()
            guard !inboundStopped, !overInboundBounds(unanswered: unansweredLimit) else { return }
            paused = false
            stream.resumeInbound()
        }
    }

    // MARK: authentication (event loop)

    /// AUTHENTICATED is about to be written: from now on the client may send frames up to the
    /// full maximum, the deadline is off and the unauthenticated-session slot is free.
    private func promoteToAuthenticated() {
        guard !authenticated else { return }
        authenticated = true
        decoder.setMaxFrameSize(min(limits.maxFrameSize, WireLimits.protocolMaxFrameSize))
        stream.openReceiveWindow()
        authenticationTask?.cancel()
        authenticationTask = nil
        ticket?.release()
        ticket = nil
    }

    private func authenticationDeadline() {
        authenticationTask = nil
        guard !authenticated, !lock.withLock({ authenticatedQueued }), !endpointClosed, !stream.isClosed else { return }
        // The node's own slowness (a nonce or a session waiting for the store) does not count
        // against the client: while the node owes an answer the deadline moves on by a second,
        // up to three times the deadline in all.
        updateInboundPause()
        if inboundAwaitingAnswer > 0, NIODeadline.now() < opened + limits.authenticationTimeout * 3 {
            authenticationTask = eventLoop.scheduleTask(in: .seconds(1)) { [weak self] in self?.authenticationDeadline()
            }
            return
        }
        metrics.authenticationTimeouts.increment()
        logger.info(
            "not authenticated in time, closing the sync stream",
            metadata: ["seconds": "\(limits.authenticationTimeoutSeconds)"])
        inboundStopped = true
        notifyEndpointClosed()
        close(
            with: ErrorFrame(
                code: .authenticationRequired,
                reason: "not authenticated within \(limits.authenticationTimeoutSeconds) s of the stream's opening",
                isFatal: true))
    }

    // MARK: idle timeout (event loop)

    private func armIdleTimer(at deadline: NIODeadline? = nil) {
        idleTask = eventLoop.scheduleTask(deadline: deadline ?? lastInbound + limits.idleTimeout) { [weak self] in
            self?.idleCheck()
        }
    }

    private func idleCheck() {
        guard !stream.isClosed, !endpointClosed else { return }
        // A client reading a paced answer is not idle (the stall checks watch it instead):
        // a paced answer waits for room or for a lease of the answer budget, or asked for room
        // less than the idle timeout ago (between two waits it reads the store).
        let now = NIODeadline.now()
        let lastActive =
            leaseWaitSince != nil ? now : lock.withLock { roomWaiters.isEmpty ? max(lastInbound, lastPacedFrame) : now }
        if now >= lastActive + limits.idleTimeout {
            metrics.idleTimeouts.increment()
            logger.info("idle timeout, closing the sync stream")
            inboundStopped = true
            notifyEndpointClosed()
            close(with: nil)
        } else {
            // Never a deadline already past (a paced answer would make that a busy loop).
            armIdleTimer(at: lastActive + limits.idleTimeout)
        }
    }

    // MARK: SessionOutbound (any thread)

    public var connectionID: UInt64? { stream.connectionID }

    public func send(_ frames: [Frame]) {
        var overflow = false
        var schedule = false
        var waiters: [CheckedContinuation<Bool, Never>] = []
        lock.withLock {
            guard !outboundClosed else { return }
            for frame in frames {
                do {
                    try frame.encode(into: &pending)
                } catch {
                    logger.error(
                        "cannot encode an outbound frame", metadata: ["type": "\(frame.type)", "error": "\(error)"])
                    continue
                }
                if Self.isAnswer(frame) { answersSent += 1 }
                if case .authenticated = frame { authenticatedQueued = true }
            }
            let overShare = reportQueue()
            if overShare || pending.readableBytes + inFlightBytes > limits.maxOutboundBytes {
                outboundClosed = true
                overflow = true
                pending = ByteBuffer()
                _ = reportQueue()
                waiters = takeRoomWaiters()
            } else if !flushScheduled {
                flushScheduled = true
                schedule = true
            }
        }
        for waiter in waiters { waiter.resume(returning: false) }
        if overflow {
            eventLoop.execute { self.slowConsumer() }
        } else if schedule {
            flusher.schedule(self)
        }
    }

    public func close(with error: ErrorFrame?) {
        var schedule = false
        var waiters: [CheckedContinuation<Bool, Never>] = []
        lock.withLock {
            guard !outboundClosed else { return }
            if let error {
                do { try Frame.error(error).encode(into: &pending) } catch {
                    logger.error("cannot encode the closing error frame", metadata: ["error": "\(error)"])
                }
            }
            outboundClosed = true
            finishAfterFlush = true
            _ = reportQueue()
            waiters = takeRoomWaiters()
            if !flushScheduled {
                flushScheduled = true
                schedule = true
            }
        }
        for waiter in waiters { waiter.resume(returning: false) }
        if schedule { flusher.schedule(self) }
    }

    // Bytes written to the stream whose write promise has not completed (guarded by `lock`).
    private var inFlightBytes = 0

    /// Moves the pending frames to the stream through `batch` (the loop's flusher then writes
    /// each connection once).
    func flush(into batch: inout TransportWriteBatch) {
        eventLoop.preconditionInEventLoop()
        let (buffer, finish, promote) = lock.withLock { () -> (ByteBuffer, Bool, Bool) in
            flushScheduled = false
            let buffer = pending
            pending = ByteBuffer()
            inFlightBytes += buffer.readableBytes
            let finish = finishAfterFlush
            finishAfterFlush = false
            return (buffer, finish, authenticatedQueued)
        }
        // Before the client can read AUTHENTICATED, so its next frame meets the full limit.
        if promote && !authenticated && !endpointClosed { promoteToAuthenticated() }
        if buffer.readableBytes > 0 {
            metrics.bytesOut.increment(by: Int64(buffer.readableBytes))
            // In pieces, each with its own promise: the stall check and a waiting paced answer
            // see the client's progress every piece, not once a whole flush (a paced answer's
            // frame is up to ~2 MiB) was taken. With one promise per flush a reader slower than
            // ~70 KB/s never completed a write within the 30 s stall timeout and was reset
            // as if it had stopped.
            var rest = buffer
            while rest.readableBytes > 0, let piece = rest.readSlice(length: min(Self.writePiece, rest.readableBytes)) {
                let size = piece.readableBytes
                let promise = eventLoop.makePromise(of: Void.self)
                promise.futureResult.whenComplete { _ in self.taken(size) }
                batch.write(piece, to: stream, promise: promise)
            }
        }
        if finish {
            inboundStopped = true
            stream.finish()
            scheduleGraceReset()
        }
        if paused { updateInboundPause() }
    }

    /// The largest piece written with one promise (one HTTP/2 DATA frame's worth).
    static let writePiece = 16 * 1024

    /// The transport took `count` queued bytes (the client read, or the stream closed).
    private func taken(_ count: Int) {
        let waiters = lock.withLock { () -> [CheckedContinuation<Bool, Never>] in
            inFlightBytes -= count
            _ = reportQueue()
            lastDrain = .now()
            guard queuedBytes <= roomThreshold else { return [] }
            return takeRoomWaiters()
        }
        for waiter in waiters { waiter.resume(returning: true) }
        // A stream paused for its outbound queue may read again.
        if paused { updateInboundPause() }
    }

    // MARK: paced answers

    /// Bytes queued for the client: pending plus written and not yet taken (under `lock`).
    private var queuedBytes: Int { pending.readableBytes + inFlightBytes }

    /// Tells the node's budget how the queue changed since the last report (under `lock`);
    /// true when this stream is over its share of a node over budget.
    private func reportQueue() -> Bool {
        guard let budget else { return false }
        let queued = queuedBytes
        defer { reportedBytes = queued }
        return budget.add(queued - reportedBytes, queued: queued)
    }

    /// Empties the waiter list (under `lock`); the caller resumes them outside it.
    private func takeRoomWaiters() -> [CheckedContinuation<Bool, Never>] {
        defer { roomWaiters = [] }
        return roomWaiters
    }

    public func roomForPacedAnswer() async -> Bool {
        await room(atMost: limits.pacedAnswerQueueBytes)
    }

    /// The queue is down to one write piece: the page before has left the node.
    public func pacedAnswerDrained() async -> Bool {
        await room(atMost: min(Self.writePiece, limits.pacedAnswerQueueBytes))
    }

    private func room(atMost threshold: Int) async -> Bool {
        enum Room { case yes, closed, wait }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let room = lock.withLock { () -> Room in
                if outboundClosed { return .closed }
                lastPacedFrame = .now()
                if queuedBytes <= threshold { return .yes }
                if roomWaiters.isEmpty {
                    // The stall clock starts with the wait (or where the lease wait left it).
                    let now = NIODeadline.now()
                    if let carried = carriedStall, now < carried.at + limits.stalledReaderTimeout {
                        lastDrain = min(carried.since, now)
                    } else {
                        lastDrain = now
                    }
                }
                carriedStall = nil
                roomThreshold = threshold
                roomWaiters.append(continuation)
                return .wait
            }
            switch room {
            case .yes: continuation.resume(returning: true)
            case .closed: continuation.resume(returning: false)
            case .wait: eventLoop.execute { self.armStallCheck() }
            }
        }
    }

    /// Checks, one stall timeout after the client's last progress, that a waiting paced
    /// answer's client took something meanwhile; resets it as a slow consumer otherwise.
    /// Progress is this stream's bytes taken, or, while the connection's output waits for
    /// its socket, the client reading any of the connection (this stream's bytes wait behind
    /// the socket's then, which drains in the kernel's large steps).
    private func armStallCheck(from progress: NIODeadline? = nil) {
        guard stallTask == nil, !stream.isClosed else { return }
        let deadline = (progress ?? lock.withLock { lastDrain }) + limits.stalledReaderTimeout
        stallTask = eventLoop.scheduleTask(deadline: deadline) { [weak self] in
            guard let self else { return }
            self.stallTask = nil
            let (waiting, lastDrain) = self.lock.withLock { (!self.roomWaiters.isEmpty, self.lastDrain) }
            guard waiting, !self.stream.isClosed else { return }
            let progress = max(lastDrain, self.stream.socketProgressWhileBlocked ?? lastDrain)
            if NIODeadline.now() >= progress + self.limits.stalledReaderTimeout {
                self.logger.info(
                    "the client read nothing of a paced answer in time",
                    metadata: ["seconds": "\(self.limits.stalledReaderTimeoutSeconds)"])
                self.slowConsumer()
            } else {
                self.armStallCheck(from: progress)
            }
        }
    }

    public func waitsForAnswerBudget(_ waiting: Bool) {
        eventLoop.execute { self.leaseWait(waiting) }
    }

    private func leaseWait(_ waiting: Bool) {
        if waiting {
            guard leaseWaitSince == nil, !stream.isClosed, !endpointClosed else { return }
            leaseWaitSince = .now()
            leaseStallCheck()
            return
        }
        guard let since = leaseWaitSince else { return }
        leaseWaitSince = nil
        leaseStallTask?.cancel()
        leaseStallTask = nil
        // Granted: if the connection read nothing during the wait, the clock runs on.
        var carried: (since: NIODeadline, at: NIODeadline)? = nil
        if let held = outputHeldSince, let reading = stream.connectionReading {
            carried = (max(since, held, reading.lastRead), .now())
        }
        lock.withLock { carriedStall = carried }
        outputHeldSince = nil
    }

    /// How often a lease wait looks at the connection (at most half the stall timeout).
    private var leaseStallPoll: TimeAmount {
        min(.seconds(1), .nanoseconds(limits.stalledReaderTimeout.nanoseconds / 2))
    }

    private func armLeaseStallCheck(at deadline: NIODeadline) {
        leaseStallTask = eventLoop.scheduleTask(deadline: deadline) { [weak self] in self?.leaseStallCheck() }
    }

    /// While the answer waits for a lease: resets the stream once its connection has held
    /// output for the client for the stall timeout without the client reading any of it
    /// (the same bound as a reader that stops mid-answer); looks again every poll otherwise.
    private func leaseStallCheck() {
        leaseStallTask = nil
        guard let since = leaseWaitSince, !stream.isClosed, !endpointClosed, let reading = stream.connectionReading
        else { return }
        let now = NIODeadline.now()
        // Output held is output beyond the client's windows: a client that read what it had
        // would have sent a WINDOW_UPDATE (moving `lastRead`). Output that stops being held
        // without one went with a stream that closed; the clock is not restarted for that.
        if reading.holdsOutput, outputHeldSince == nil { outputHeldSince = now }
        if reading.holdsOutput, let held = outputHeldSince,
            now >= max(since, held, reading.lastRead) + limits.stalledReaderTimeout
        {
            logger.info(
                "the client read nothing of its connection while its answer waited for the answer budget",
                metadata: ["seconds": "\(limits.stalledReaderTimeoutSeconds)"])
            slowConsumer()
            return
        }
        armLeaseStallCheck(at: now + leaseStallPoll)
    }

    private func scheduleGraceReset() {
        guard graceTask == nil else { return }
        graceTask = eventLoop.scheduleTask(in: .seconds(Int64(limits.closeGraceSeconds))) { [weak self] in
            guard let self, !self.stream.isClosed else { return }
            self.stream.reset(code: 0)  // NO_ERROR: we are done, the client did not end its side
        }
    }

    /// Closes the outbound side, drops what was queued and tells paced answers there is no room.
    private func dropOutbound() {
        let waiters = lock.withLock { () -> [CheckedContinuation<Bool, Never>] in
            outboundClosed = true
            pending = ByteBuffer()
            _ = reportQueue()
            return takeRoomWaiters()
        }
        for waiter in waiters { waiter.resume(returning: false) }
    }

    private func slowConsumer() {
        stallTask?.cancel()
        stallTask = nil
        leaseStallTask?.cancel()
        leaseStallTask = nil
        leaseWaitSince = nil
        dropOutbound()
        metrics.slowConsumers.increment()
        logger.warning(
            "slow consumer: outbound queue over its bound (or over its share of the node's outbound budget), resetting the stream",
            metadata: ["maxOutboundBytes": "\(limits.maxOutboundBytes)"])
        inboundStopped = true
        notifyEndpointClosed()
        stream.reset(code: 0xB)  // ENHANCE_YOUR_CALM
    }
}
