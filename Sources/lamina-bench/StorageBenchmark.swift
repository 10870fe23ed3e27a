import ArgumentParser
import Dispatch
import Foundation
import LaminaModel
import LaminaNode
import LaminaStore

/// Durable write throughput and commit latency of the node's store: closed-loop writers each
/// send messages the way the node's send path stores them (message + statuses + two feed
/// entries + idempotency record, one command each), with group commit and synchronous=FULL.
struct StorageBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storage",
        abstract: "Durable message appends per second and commit latency (p50/p99) of the node's store."
    )

    @Option(help: "Messages to store in all.")
    var messages = 10_000

    @Option(help: "Concurrent closed-loop writers (each waits for its commit before the next).")
    var writers = 1

    @Option(help: "Directory for the temporary database (removed afterwards).")
    var directory = FileManager.default.temporaryDirectory.path

    func validate() throws {
        guard (1...10_000_000).contains(messages) else { throw ValidationError("--messages must be 1...10,000,000") }
        guard (1...10_000).contains(writers) else { throw ValidationError("--writers must be 1...10,000") }
    }

    func run() throws {
        let dir = URL(fileURLWithPath: directory).appendingPathComponent("lamina-storage-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try NodeStore(
            path: dir.appendingPathComponent("node.sqlite").path,
            configuration: StorageConfiguration(writeQueueCapacity: max(writers, 1) * 2))
        defer { try? store.close() }

        let node = NodeID(1)
        let peer: UserID = "peer"
        let created = LockedList<ConversationID>()
        let setup = DispatchSemaphore(value: 0)
        try store.submit(
            { tx in
                var ids: [ConversationID] = []
                for w in 0..<writers {
                    let c = try Conversation(
                        creator: try UserID("sender-\(w)"), participants: [peer],
                        options: ConversationOptions(isDistinct: false))
                    _ = try tx.createConversation(
                        c, hlc: HLCTimestamp(physical: 1, logical: UInt32(w), node: node), origin: node)
                    ids.append(c.id)
                }
                return ids
            },
            completion: { result in
                if case .success(let ids) = result { created.set(ids) }
                setup.signal()
            })
        setup.wait()
        let conversations = created.get()
        guard conversations.count == writers else { throw ValidationError("setup failed") }
        let before = store.writerStatistics

        let recorder = LatencyRecorder(capacity: messages)
        let done = DispatchGroup()
        let share = messages / writers
        let start = DispatchTime.now().uptimeNanoseconds
        for w in 0..<writers {
            let count = share + (w < messages % writers ? 1 : 0)
            guard count > 0 else { continue }
            done.enter()
            let loop = WriterLoop(
                store: store, conversation: conversations[w], sender: try UserID("sender-\(w)"), peer: peer, node: node,
                total: count, recorder: recorder
            ) {
                done.leave()
            }
            loop.next()
        }
        done.wait()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let after = store.writerStatistics
        let latencies = recorder.sorted()
        func percentile(_ p: Double) -> Double {
            Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1e6
        }
        let transactions = after.transactions - before.transactions
        print("storage: \(latencies.count) messages, \(writers) writer(s), \(recorder.failures) failed")
        print(
            String(
                format: "  throughput: %.0f messages/s durably committed (%.2f s)", Double(latencies.count) / elapsed,
                elapsed))
        print(
            String(
                format: "  commit latency: p50 %.3f ms, p99 %.3f ms, max %.3f ms", percentile(0.5), percentile(0.99),
                Double(latencies.last ?? 0) / 1e6))
        print(
            String(
                format: "  transactions: %d (%.1f commands per transaction, largest %d)", transactions,
                Double(latencies.count) / Double(max(transactions, 1)), after.largestBatch))
    }
}

/// One closed-loop writer: submits a message, and on its commit the next.
private final class WriterLoop: @unchecked Sendable {
    let store: NodeStore
    let conversation: ConversationID
    let sender: UserID
    let peer: UserID
    let node: NodeID
    let total: Int
    let recorder: LatencyRecorder
    let finished: @Sendable () -> Void
    var sent = 0

    init(
        store: NodeStore, conversation: ConversationID, sender: UserID, peer: UserID, node: NodeID, total: Int,
        recorder: LatencyRecorder, finished: @escaping @Sendable () -> Void
    ) {
        self.store = store
        self.conversation = conversation
        self.sender = sender
        self.peer = peer
        self.node = node
        self.total = total
        self.recorder = recorder
        self.finished = finished
    }

    func next() {
        guard sent < total else { return finished() }
        sent += 1
        let position = HLCTimestamp(physical: 1_000 + UInt64(sent), logical: 0, node: node)
        let message = Message(
            conversationID: conversation, sender: sender,
            parts: [MessagePart(mimeType: .textPlain, content: .inline(Array("message \(sent)".utf8)))],
            sentAt: Timestamp(millisecondsSince1970: Int64(position.physical)), position: position,
            recipientStatus: [sender: .read, peer: .sent]
        )
        let (sender, peer, node) = (sender, peer, node)
        let key = IdempotencyKey(user: sender, id: message.id.uuid)
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            try store.submit(
                { tx in
                    if let recorded = try tx.read.recordedResult(for: key) { return recorded }
                    try tx.appendMessage(message, hlc: position, origin: node)
                    let seqs = try tx.appendChange(
                        to: [sender, peer], kind: 1, conversation: message.conversationID, message: message.id,
                        payload: Array(repeating: 0, count: 64), at: message.sentAt!)
                    let ack = Array("ack \(seqs[sender] ?? 0)".utf8)
                    try tx.recordResult(ack, for: key, at: message.sentAt!)
                    return ack
                },
                completion: { result in
                    let nanos = DispatchTime.now().uptimeNanoseconds - started
                    if case .success = result { self.recorder.record(nanos) } else { self.recorder.fail() }
                    self.next()
                })
        } catch {
            recorder.fail()
            next()
        }
    }
}

/// Latencies in nanoseconds, recorded from the writer thread.
private final class LatencyRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [UInt64]
    private(set) var failures = 0

    init(capacity: Int) {
        values = []
        values.reserveCapacity(capacity)
    }

    func record(_ nanos: UInt64) {
        lock.lock()
        values.append(nanos)
        lock.unlock()
    }
    func fail() {
        lock.lock()
        failures += 1
        lock.unlock()
    }
    func sorted() -> [UInt64] {
        lock.lock()
        defer { lock.unlock() }
        return values.sorted()
    }
}

/// A list handed from a completion to the waiting thread.
private final class LockedList<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [T] = []
    func set(_ v: [T]) {
        lock.lock()
        values = v
        lock.unlock()
    }
    func get() -> [T] {
        lock.lock()
        defer { lock.unlock() }
        return values
    }
}
