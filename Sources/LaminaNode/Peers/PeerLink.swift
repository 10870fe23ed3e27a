import Foundation
import LaminaMerge
import LaminaModel
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// One peer session (SPEC §6.5) on one HTTP/2 stream, the same on the dialing and the
/// accepting side: PEER_HELLO, VERSION_VECTOR, then REPLICATE frames each way, each answered
/// with PEER_ACK once its operations are durable.
///
/// Outbound, a pump sends what the other node lacks (its vector at hello, raised by every
/// PEER_ACK and by every operation it sent us), at most ``maxUnacknowledgedFrames`` REPLICATE
/// frames ahead of its acknowledgements, and waits for the engine's replication signal when
/// there is nothing to send. Inbound, REPLICATE frames are applied one after the other; the
/// stream stops reading while ``maxPendingFrames`` wait (HTTP/2 flow control then slows the
/// sender).
final class PeerLink: TransportStreamDelegate, @unchecked Sendable {
    /// REPLICATE frames sent and not yet acknowledged, at most.
    static let maxUnacknowledgedFrames = 8
    /// Received REPLICATE frames waiting to be applied before the stream stops reading.
    static let maxPendingFrames = 4
    /// Operations per REPLICATE frame (SPEC §6.5: 1...256).
    static let operationsPerFrame = 256

    let stream: TransportStream
    private let engine: NodeEngine
    private let local: PeerHello
    /// The node id the peer's certificate names; its PEER_HELLO must claim the same.
    private let certified: NodeID
    private let logger: Logger
    private let onClose: @Sendable (PeerLink) -> Void
    /// Told once the session is up: both hellos agreed and the peer's VERSION_VECTOR arrived.
    private let onUp: @Sendable (PeerLink) -> Void

    private struct State {
        var decoder = FrameDecoder(limits: WireLimits.default)
        var remote: PeerHello?
        /// What the other node holds, as far as this side knows.
        var theirs: VersionVector?
        var unacknowledged = 0
        var pendingApply = 0
        var paused = false
        var closed = false
        var applying: Task<Void, Never>?
        var pump: Task<Void, Never>?
        /// Whether this side's PEER_HELLO and VERSION_VECTOR have gone out: no REPLICATE before
        /// them (the peer's vector can arrive first).
        var introduced = false
        /// Operations applied from this link and sent over it (for metrics and tests).
        var received = 0
        var sent = 0
        /// What the peer acknowledged holding durably, and this node's vector at the last look.
        var acknowledged = VersionVector()
        var ours = VersionVector()
        /// Since when the peer has lacked something this node holds (nil: caught up).
        var laggingSince: ContinuousClock.Instant?
        /// Why the link ended (set once it has).
        var endReason: String?
    }
    private let state = NIOLockedValueBox(State())
    /// Wakes the pump when an acknowledgement frees room.
    private let room = ReplicationSignal()
    /// Succeeds once the link has closed, for whatever reason.
    let closed: EventLoopPromise<Void>

    init(
        stream: TransportStream, engine: NodeEngine, local: PeerHello, certified: NodeID, logger: Logger,
        onUp: @escaping @Sendable (PeerLink) -> Void, onClose: @escaping @Sendable (PeerLink) -> Void
    ) {
        self.stream = stream
        self.engine = engine
        self.local = local
        self.certified = certified
        self.logger = logger
        self.onUp = onUp
        self.onClose = onClose
        self.closed = stream.eventLoop.makePromise(of: Void.self)
    }

    /// Ends a link that never started because the other link between the two nodes was kept:
    /// its `closed` promise succeeds, as a closed link's does (an unfulfilled promise may not be
    /// dropped: NIO's debug builds trap on it).
    func discard() {
        state.withLockedValue { $0.closed = true }
        closed.succeed(())
    }

    /// The peer's node id once its PEER_HELLO arrived.
    var remoteNode: NodeID? { state.withLockedValue { $0.remote?.nodeID } }
    var isClosed: Bool { state.withLockedValue { $0.closed } }
    /// Whether the session came up (the peer's VERSION_VECTOR arrived), even if it has ended since.
    var cameUp: Bool { state.withLockedValue { $0.theirs != nil } }
    /// Why the link ended, once it has: "no PING ACK in 2 s", "the peer ended the session", ...
    var endReason: String? { state.withLockedValue { $0.endReason } }
    /// Operations applied from this link so far, and sent over it.
    var counts: (received: Int, sent: Int) { state.withLockedValue { ($0.received, $0.sent) } }

    /// How far the peer is behind this node: operations this node held at its last look that
    /// the peer has not acknowledged, and for how long it has lacked some (0 when caught up).
    var lag: (operations: UInt64, seconds: Double) {
        state.withLockedValue { s in
            var missing: UInt64 = 0
            for (origin, held) in s.ours.counters where held > s.acknowledged[origin] {
                missing += held - s.acknowledged[origin]
            }
            let seconds =
                s.laggingSince.map { ContinuousClock.now - $0 }.map {
                    Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18
                } ?? 0
            return (missing, missing == 0 ? 0 : seconds)
        }
    }

    /// Records this node's vector and whether the peer now lacks something.
    private func observe(ours: VersionVector) {
        state.withLockedValue { s in
            s.ours = ours
            let behind = ours.counters.contains { $0.value > s.acknowledged[$0.key] }
            if !behind { s.laggingSince = nil } else if s.laggingSince == nil { s.laggingSince = .now }
        }
    }

    /// Sends PEER_HELLO and this node's VERSION_VECTOR (the dialer after the response
    /// headers, the acceptor after its own).
    func start() async {
        do {
            let vector = try await engine.versionVector()
            send([.peerHello(local), .versionVector(vector)])
            state.withLockedValue { $0.introduced = true }
            startPumpIfReady()
        } catch {
            fail(WireError(.internalError, "cannot read the version vector: \(error)"))
        }
    }

    /// Starts sending REPLICATE frames once both sides' vectors are out: ours sent, theirs received.
    private func startPumpIfReady() {
        let started: Bool = state.withLockedValue { s in
            guard s.introduced, s.theirs != nil, s.pump == nil, !s.closed else { return false }
            s.pump = Task { await self.runPump() }
            return true
        }
        if started {
            onUp(self)
            startPresence()
        }
    }

    /// Once the session is up: this node's presence reports go to the peer, now (all of them)
    /// and as they change, and so do the reports of other nodes it relays (SPEC §6.6).
    private func startPresence() {
        guard let peer = remoteNode else { return }
        engine.addPresenceSender(ObjectIdentifier(self)) { [weak self] entries in
            guard let self, !self.isClosed else { return }
            self.send([.peerPresence(PeerPresence(entries: entries))])
        }
        engine.presenceLinkUp(peer, key: ObjectIdentifier(self)) { [weak self] frames in
            guard let self, !self.isClosed else { return }
            self.send(frames)
        }
    }

    // MARK: TransportStreamDelegate (event loop)

    func streamDidReceiveHeaders(_ stream: TransportStream, headers: HeaderFields) {
        guard headers[":status"] == "200" else {
            logger.warning("peer refused the session", metadata: ["status": "\(headers[":status"] ?? "?")"])
            close(reset: true, reason: "the peer refused the session (status \(headers[":status"] ?? "?"))")
            return
        }
    }

    func streamDidReceiveData(_ stream: TransportStream, data: ByteBuffer) {
        let (frames, failure) = state.withLockedValue { (s: inout State) -> ([Frame], WireError?) in
            var frames: [Frame] = []
            s.decoder.feed(data)
            do throws(WireError) {
                while let frame = try s.decoder.next() { frames.append(frame) }
            } catch {
                return (frames, error)
            }
            return (frames, nil)
        }
        for frame in frames { receive(frame) }
        if let failure { fail(failure) }
    }

    func streamDidReceiveEnd(_ stream: TransportStream, trailers: HeaderFields?) {
        close(reset: false, reason: "the peer ended the session")
    }

    func streamDidClose(_ stream: TransportStream, error: TransportError?) {
        if let error { logger.info("peer stream closed", metadata: ["error": "\(error)"]) }
        close(reset: false, reason: error?.reason ?? "the stream closed")
    }

    private func receive(_ frame: Frame) {
        switch frame {
        case .peerHello(let hello):
            let error: WireError? = state.withLockedValue { s in
                guard s.remote == nil else { return WireError(.unexpectedFrame, "a second PEER_HELLO") }
                guard hello.cluster == local.cluster else {
                    return WireError(
                        .forbidden, "cluster \"\(hello.cluster)\" is not this node's cluster \"\(local.cluster)\"")
                }
                guard hello.nodeID == certified else {
                    return WireError(
                        .forbidden,
                        "the peer claims node \(hello.nodeID.rawValue) but its certificate names node \(certified.rawValue)"
                    )
                }
                guard hello.nodeID != local.nodeID else {
                    return WireError(.forbidden, "a node does not peer with itself")
                }
                guard hello.minVersion <= local.maxVersion, local.minVersion <= hello.maxVersion else {
                    return WireError(.unsupportedVersion, "no protocol version in common")
                }
                s.remote = hello
                return nil
            }
            if let error { fail(error) }
        case .versionVector(let vector):
            let start: Bool = state.withLockedValue { s in
                guard s.remote != nil, s.theirs == nil else { return false }
                s.theirs = vector
                return true
            }
            guard start else { return fail(WireError(.unexpectedFrame, "VERSION_VECTOR out of order")) }
            startPumpIfReady()
        case .replicate(let replicate):
            guard state.withLockedValue({ $0.theirs != nil }) else {
                return fail(WireError(.unexpectedFrame, "REPLICATE before VERSION_VECTOR"))
            }
            enqueueApply(replicate.operations)
        case .peerAck(let ack):
            let ours: VersionVector = state.withLockedValue { s in
                s.unacknowledged = max(0, s.unacknowledged - 1)
                s.theirs = s.theirs.map { $0.merged(with: ack.vector) } ?? ack.vector
                s.acknowledged = s.acknowledged.merged(with: ack.vector)
                return s.ours
            }
            observe(ours: ours)
            room.notify()
        case .peerPresence(let presence):
            guard let node = state.withLockedValue({ $0.theirs != nil ? $0.remote?.nodeID : nil }) else {
                return fail(WireError(.unexpectedFrame, "PEER_PRESENCE before VERSION_VECTOR"))
            }
            engine.receivePeerPresence(presence.entries, origin: node, via: node)
        case .peerPresenceRelayed(let relayed):
            guard let node = state.withLockedValue({ $0.theirs != nil ? $0.remote?.nodeID : nil }) else {
                return fail(WireError(.unexpectedFrame, "PEER_PRESENCE_RELAYED before VERSION_VECTOR"))
            }
            engine.receivePeerPresence(relayed.entries, origin: relayed.origin, via: node)
        case .peerPresenceWithdrawn(let withdrawn):
            guard let node = state.withLockedValue({ $0.theirs != nil ? $0.remote?.nodeID : nil }) else {
                return fail(WireError(.unexpectedFrame, "PEER_PRESENCE_WITHDRAWN before VERSION_VECTOR"))
            }
            engine.receivePresenceWithdrawal(withdrawn.origins, from: node)
        case .error(let error):
            logger.warning("peer sent an error", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            if error.isFatal { close(reset: false, reason: "the peer sent \(error.code): \(error.reason)") }
        default:
            fail(WireError(.unexpectedFrame, "\(frame.type.name) is not a peer frame"))
        }
    }

    // MARK: inbound operations

    private func enqueueApply(_ operations: [ReplicatedOperation]) {
        let pause: Bool = state.withLockedValue { s in
            s.pendingApply += 1
            // They hold what they send: never send it back.
            var theirs = s.theirs ?? VersionVector()
            for op in operations {
                theirs.apply(OperationID(origin: op.origin, counter: op.counter))
                s.acknowledged.apply(OperationID(origin: op.origin, counter: op.counter))  // in their log
            }
            s.theirs = theirs
            let previous = s.applying
            s.applying = Task {
                await previous?.value
                await self.apply(operations)
            }
            if s.pendingApply >= Self.maxPendingFrames, !s.paused {
                s.paused = true
                return true
            }
            return false
        }
        if pause { stream.pauseInbound() }
    }

    private func apply(_ operations: [ReplicatedOperation]) async {
        guard !isClosed else { return }
        do {
            let abandoned = engine.abandonedParkedOperations
            let vector = try await engine.applyReplicated(operations)
            send([.peerAck(PeerAck(vector: vector))])
            let now = engine.abandonedParkedOperations
            if now > abandoned {
                logger.warning(
                    "gave up parked operations whose conversation never arrived",
                    metadata: [
                        "given_up": "\(now - abandoned)", "total": "\(now)",
                        "peer": "\(remoteNode.map { String($0.rawValue, radix: 16) } ?? "?")",
                    ])
            }
        } catch let error as WireError {
            fail(error)
        } catch {
            fail(WireError(.internalError, "cannot apply replicated operations: \(error)"))
        }
        let resume: Bool = state.withLockedValue { s in
            s.pendingApply -= 1
            s.received += operations.count
            if s.paused, s.pendingApply < Self.maxPendingFrames {
                s.paused = false
                return true
            }
            return false
        }
        if resume { stream.resumeInbound() }
    }

    // MARK: outbound operations

    private func runPump() async {
        let signal = engine.replicationSignal
        while !isClosed {
            let seen = signal.generation
            let roomSeen = room.generation
            let (theirs, full) = state.withLockedValue {
                ($0.theirs ?? VersionVector(), $0.unacknowledged >= Self.maxUnacknowledgedFrames)
            }
            if full {
                await room.wait(after: roomSeen)
                continue
            }
            let operations: [ReplicatedOperation]
            do {
                let read = try await engine.operationsAndVector(missingFrom: theirs, limit: Self.operationsPerFrame)
                observe(ours: read.ours)
                operations = read.operations
            } catch {
                return fail(WireError(.internalError, "cannot read the replication log: \(error)"))
            }
            if operations.isEmpty {
                await signal.wait(after: seen)
                continue
            }
            state.withLockedValue { s in
                var raised = s.theirs ?? VersionVector()
                for op in operations { raised.apply(OperationID(origin: op.origin, counter: op.counter)) }
                s.theirs = raised
                s.unacknowledged += 1
                s.sent += operations.count
            }
            // A peer without the receipt switches (an older node) reads the old single flag; one
            // without mentions, messages without them.
            let features = state.withLockedValue { $0.remote?.features ?? [] }
            var sent = features.contains(.receiptSwitches) ? operations : operations.map(\.withSingleReceiptsFlag)
            if !features.contains(.mentions) { sent = sent.map(\.withoutMentions) }
            // A peer without replies (an older node) gets a reply as a plain message (SPEC §6.5).
            if !features.contains(.replies) { sent = sent.map(\.withoutThreadFields) }
            // A peer without per-part edits (an older node) gets an edit's whole list (SPEC §6.2).
            if !features.contains(.perPartEdits) { sent = sent.map(\.withWholePartLists) }
            send([.replicate(Replicate(operations: sent))])
        }
    }

    // MARK: output and closing

    private func send(_ frames: [Frame]) {
        var buffer = ByteBuffer()
        for frame in frames {
            do { try frame.encode(into: &buffer) } catch {
                logger.error(
                    "cannot encode a peer frame", metadata: ["type": "\(frame.type.name)", "error": "\(error)"])
                return
            }
        }
        stream.write(buffer, promise: nil)
    }

    /// Sends a fatal ERROR and closes the stream.
    private func fail(_ error: WireError) {
        guard !isClosed else { return }
        logger.warning("peer session failed", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
        var frame = ErrorFrame(error)
        frame.isFatal = true  // every error ends a peer session (SPEC §9)
        send([.error(frame)])
        stream.finish()
        close(reset: false, reason: "\(error.code): \(error.reason)")
    }

    private func close(reset: Bool, reason: String) {
        let first: Bool = state.withLockedValue { s in
            guard !s.closed else { return false }
            s.closed = true
            s.endReason = reason
            s.pump?.cancel()
            return true
        }
        guard first else { return }
        engine.removePresenceSender(ObjectIdentifier(self))
        if cameUp, let node = remoteNode { engine.presenceLinkDown(node, key: ObjectIdentifier(self)) }
        if reset { stream.reset() }
        room.notify()
        engine.replicationSignal.notify()
        onClose(self)
        closed.succeed(())
    }
}

/// A generation counter that wakes waiters when it moves: the engine's "the replication log
/// grew" signal, and a link's "an acknowledgement freed room".
final class ReplicationSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    init() {}

    var generation: UInt64 { state.withLockedValue { $0.generation } }

    /// Moves the generation and wakes every waiter.
    func notify() {
        let waiters = state.withLockedValue { s in
            s.generation &+= 1
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is past `seen` (at once if it already is).
    func wait(after seen: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { s -> Bool in
                if s.generation != seen { return true }
                s.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
