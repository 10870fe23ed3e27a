import ArgumentParser
import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Options every write-path mode shares.
struct WriteLoadOptions: ParsableArguments {
    @Option(help: "The lamina-node binary (default: lamina-node next to lamina-bench, i.e. the same build directory).")
    var nodeBinary: String?

    @Option(help: "Message text size in bytes (the send time rides in its first 20 bytes).")
    var size = 100

    @ArgumentParser.Flag(
        inversion: .prefixedNo, help: "Senders SYNC like SDK clients (their own messages come back to them as changes)."
    )
    var senderSync = true

    @Option(help: "Seconds to wait for the last deliveries/ACKs after the load ends before giving up on them.")
    var drainTimeout: Double = 30

    @Option(
        help:
            "rate and closed: the nodes' store, postgres://user@host:port/database (EMPTIED before each round); default: SQLite in each node's data directory."
    )
    var store: String?

    @ArgumentParser.Flag(
        help:
            "With --store: a second lamina-node on the same database (rate: senders on the first, receivers on the second; closed: senders alternate between them)."
    )
    var secondNode = false

    @Option(
        help:
            "With --store: this many lamina-node processes on the same database (closed: senders alternate between them; rate: senders on the first, receivers on the others in turn). --second-node is --nodes 2."
    )
    var nodes = 1

    /// How many nodes a round starts: `--nodes`, or 2 with `--second-node`.
    var nodeCount: Int { secondNode ? max(nodes, 2) : nodes }

    @Option(
        help:
            "The PostgreSQL server's (postmaster's) pid: its CPU and its backends' is reported per message (db_cpu_us_per_…)."
    )
    var databasePid: Int32?

    @Option(
        name: .customLong("node-argument"), parsing: .unconditionalSingleValue,
        help:
            "rate and closed: an argument added to each lamina-node's command line (repeatable; e.g. --node-argument=--event-loops --node-argument=1)."
    )
    var nodeArguments: [String] = []

    func validateStore() throws {
        guard (1...16).contains(nodes) else { throw ValidationError("--nodes must be 1 to 16") }
        if nodeCount > 1, !(store?.hasPrefix("postgres") ?? false) {
            throw ValidationError("--second-node and --nodes need --store postgres://…")
        }
    }
}

/// One user on its own TLS + HTTP/2 connection and sync stream (a `BenchSyncClient`), with
/// what the write-path modes need on top: SYNC, the messages of others as they arrive (per
/// CHANGE / CHANGE_BATCH frame, deduplicated by seq as the SDK does), and receipts as the
/// SDK sends them.
final class LoadPeer: @unchecked Sendable {
    let user: UserID
    let client: BenchSyncClient
    // Event loop only.
    private var highestSeq: UInt64 = 0
    private var handler: (@Sendable ([Message], _ frameChanges: Int) -> Void)?

    private init(user: UserID, client: BenchSyncClient) {
        self.user = user
        self.client = client
    }

    /// Connects and authenticates; with `sync`, SYNC from cursor 0 and wait for its ACK (the
    /// backlog is then sent). `handler` is called on the event loop with the messages from
    /// others in each CHANGE / CHANGE_BATCH frame (possibly none) and the frame's change count;
    /// it is in place before SYNC.
    static func connect(
        _ node: NodeProcess, user: UserID, sync: Bool, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        handler: (@Sendable ([Message], Int) -> Void)? = nil
    ) async throws -> LoadPeer {
        let client = try await BenchSyncClient.connect(url: node.url, caFile: node.caFile, group: group)
        let peer = LoadPeer(user: user, client: client)
        try await client.stream.eventLoop.submit { peer.handler = handler }.get()
        try await client.observe { [peer] frame in peer.handle(frame) }
        try await client.login(user: user, device: UUID(), dev: node.dev, cursor: sync ? 0 : nil)
        return peer
    }

    private func handle(_ frame: Frame) {
        let changes: [Change]
        switch frame {
        case .change(let c): changes = [c]
        case .changeBatch(let b): changes = b.changes
        case .ping(let p):
            client.send(.pong(p))
            return
        default: return
        }
        var received: [Message] = []
        for change in changes {
            if change.seq != 0 {
                guard change.seq > highestSeq else { continue }  // at least once: skip what was applied
                highestSeq = change.seq
            }
            if case .messageCreated(let m) = change.event, m.sender != user { received.append(m) }
        }
        handler?(received, changes.count)
    }

    /// The receipts the SDK sends for `messages` received in one frame (`ChangeDecoder`).
    static func receipts(for messages: [Message]) -> [DeliveryReceipt] {
        ChangeDecoder.deliveryReceipts(for: messages)
    }

    /// Sends a receipt; `acked` counts its ACK (or ERROR answer in `errors`).
    func sendReceipt(_ receipt: DeliveryReceipt, acked: LoadCounter, errors: LoadCounter) {
        client.request(.deliveryReceipt(receipt), id: receipt.requestID).whenComplete { result in
            if case .success(.ack) = result { acked.add() } else { errors.add() }
        }
    }

    /// Creates a non-distinct conversation with `others`.
    func createConversation(with others: [UserID]) async throws -> ConversationID {
        let conversation = ConversationID.random()
        let answer = try await client.request(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: Set(others + [user]),
                    options: ConversationOptions(isDistinct: false))),
            id: conversation.uuid
        ).get()
        guard case .ack = answer else { throw BenchFailure("create conversation: \(answer)") }
        return conversation
    }

    var failure: String? { client.failure.withLockedValue { $0 } }

    func close() async { await client.close() }
}

/// Message texts carrying their send time, and reading it back.
enum TimedText {
    /// `size` bytes (at least 20): the monotonic send time in 20 decimal digits, then 'x'.
    static func part(sentAt: UInt64, size: Int) -> MessagePart {
        var bytes = Array(String(format: "%020llu", sentAt).utf8)
        if size > bytes.count { bytes += [UInt8](repeating: UInt8(ascii: "x"), count: size - bytes.count) }
        return try! MessagePart(text: String(decoding: bytes, as: UTF8.self))
    }

    static func sentAt(_ message: Message) -> UInt64? {
        guard let bytes = message.parts.first?.inlineBytes, bytes.count >= 20 else { return nil }
        var v: UInt64 = 0
        for b in bytes.prefix(20) {
            guard b >= 48, b <= 57 else { return nil }
            v = v * 10 + UInt64(b - 48)
        }
        return v
    }
}

/// Sends SEND_MESSAGE commands and answers their completions: ACK latency recorded, a
/// transient ERROR (e.g. `overloaded`: the node's write queue was full) retried with the same
/// id after the delay it asks for when `retry` is set, counted otherwise.
struct MessageSender {
    let peer: LoadPeer
    let conversation: ConversationID
    let size: Int
    let ackLatency: LoadLatencies
    let acked: LoadCounter
    let errors: LoadCounter
    let retry: Bool

    /// Sends one message now; the future completes when it is ACKed (or failed for good).
    @discardableResult
    func send() -> EventLoopFuture<Void> {
        let sentAt = monotonicNanos()
        let frame = Frame.sendMessage(
            // Time-ordered ids, as the SDK makes them.
            SendMessage(
                messageID: .timeOrdered(), conversationID: conversation,
                parts: [TimedText.part(sentAt: sentAt, size: size)]))
        return send(frame, sentAt: sentAt, attempt: 0)
    }

    private func send(_ frame: Frame, sentAt: UInt64, attempt: Int) -> EventLoopFuture<Void> {
        guard case .sendMessage(let m) = frame else { fatalError() }
        let loop = peer.client.stream.eventLoop
        return peer.client.request(frame, id: m.messageID.uuid).flatMap { answer -> EventLoopFuture<Void> in
            switch answer {
            case .ack:
                ackLatency.record(sentAt: sentAt)
                acked.add()
                return loop.makeSucceededVoidFuture()
            case .error(let e) where retry && attempt < 100 && ChangeDecoder.transientCodes.contains(e.code):
                let delay = TimeAmount.milliseconds(Int64(e.retryAfterMilliseconds ?? 100))
                return loop.scheduleTask(in: delay) {}.futureResult.flatMap {
                    send(frame, sentAt: sentAt, attempt: attempt + 1)
                }
            default:
                errors.add()
                return loop.makeSucceededVoidFuture()
            }
        }.flatMapErrorThrowing { _ in errors.add() }
    }
}

/// Sends `total` messages round-robin over `senders` on an absolute schedule, `rate` per
/// second in total, from a plain thread (a slow ACK never delays the schedule); returns the
/// schedule's start and the time the last send went out (monotonic ns).
func sendOnSchedule(_ senders: [MessageSender], total: Int, rate: Double) async -> (start: UInt64, end: UInt64) {
    await sendOnSchedule(total: total, rate: rate) { j in senders[j % senders.count].send() }
}

/// Calls `send(j)` for j in 0..<`total` on an absolute schedule, `rate` per second, from a
/// plain thread; returns the schedule's start and the time the last send went out (monotonic ns).
func sendOnSchedule(total: Int, rate: Double, send: @escaping @Sendable (Int) -> Void) async -> (
    start: UInt64, end: UInt64
) {
    let t0 = monotonicNanos()
    let interval = 1e9 / rate
    let end: UInt64 = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            for j in 0..<total {
                sleepUntil(t0 + UInt64(Double(j) * interval))
                send(j)
            }
            continuation.resume(returning: monotonicNanos())
        }
    }
    return (t0, end)
}

/// PINGs every peer every 30 s (the node closes a stream after 120 s without an inbound
/// frame, and a receiver sends nothing).
func keepAlive(_ peers: [LoadPeer]) -> Task<Void, Never> {
    Task {
        var n: UInt64 = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(30))
            n += 1
            for p in peers { p.client.send(.ping(Ping(payload: n))) }
        }
    }
}

/// The first failure among `peers` (an undecodable frame, a fatal ERROR, a closed stream).
func firstFailure(_ peers: [LoadPeer]) -> String? {
    for p in peers { if let f = p.failure { return "\(p.user): \(f)" } }
    return nil
}

/// Waits until `done()` or `deadline` (monotonic ns) or a peer fails; polls every 5 ms.
/// Returns the failure, if any.
func waitUntil(deadline: UInt64, peers: [LoadPeer], _ done: () -> Bool) async -> String? {
    await waitUntil(deadline: deadline, failure: { firstFailure(peers) }, done)
}

/// Waits until `done()` or `deadline` (monotonic ns) or `failure()` names one; polls every
/// 5 ms. Returns the failure, if any.
func waitUntil(deadline: UInt64, failure: () -> String?, _ done: () -> Bool) async -> String? {
    while !done() {
        if let f = failure() { return f }
        if monotonicNanos() >= deadline { return nil }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return nil
}

/// Closes `peers` once `deadline` (monotonic ns) passes unless cancelled first: their
/// outstanding commands then fail, so nothing waits on a node that stopped answering.
/// `fired` counts 1 when it did.
func watchdog(_ peers: [LoadPeer], deadline: UInt64, fired: LoadCounter) -> Task<Void, Never> {
    Task {
        while monotonicNanos() < deadline {
            if Task.isCancelled { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
        if Task.isCancelled { return }
        fired.add()
        for p in peers { await p.close() }
    }
}
