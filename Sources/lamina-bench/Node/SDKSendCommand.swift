import ArgumentParser
import Foundation
import LaminaClient
import LaminaModel
import NIOConcurrencyHelpers

/// What one send costs the SDK (issue 30, item 4): a `LaminaClient` in this process sends
/// `--messages` text messages to a `lamina-node` child process over TLS + HTTP/2, keeping at
/// most `--window` unacknowledged, and counts a message done when its change reports it
/// sent (the ACK applied to the local store). Reports sends/s, this process's CPU per send
/// and its context switches per send (from `/proc/self`), so the client side of the send
/// path is measured apart from the node. Count executor hops per send from outside with
/// perf uprobes on the Swift runtime (see `--help`'s discussion).
struct SDKSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sdk-send",
        abstract:
            "Messages sent by one SDK client to a node process; sends/s, client CPU and context switches per send.",
        discussion: """
            Executor hops per send: run twice with different --messages under
              perf stat -e probe_libswift_Concurrency:swift_task_enqueueGlobal -e probe_libswift_Concurrency:swift_task_switch
            (after perf probe -x <libswift_Concurrency.so> for each symbol) and divide the difference by the difference in messages.
            """)

    @Option(help: "Messages to send (1...1000000).") var messages = 5_000
    @Option(help: "Most messages sent and not yet acknowledged (1...1000).") var window = 32
    @Option(help: "The lamina-node binary (default: next to this one).") var nodeBinary: String?

    func run() async throws {
        guard (1...1_000_000).contains(messages) else { throw ValidationError("--messages must be 1...1000000") }
        guard (1...1_000).contains(window) else { throw ValidationError("--window must be 1...1000") }
        let node = try await NodeProcess.start(binary: NodeProcess.binary(nodeBinary), label: "sdk-send")
        defer { node.stop() }
        let root = try BenchSupport.temporaryDirectory() + "/sdk-send-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try LaminaClient(
            configuration: LaminaConfiguration(
                nodeURL: URL(string: node.url)!, trust: .certificateAuthorities(URL(fileURLWithPath: node.caFile)),
                dataDirectory: URL(fileURLWithPath: root)),
            user: "bench-alice")
        let sent = SentMessages()
        let watcher = Task { [changes = alice.changes()] in
            for await batch in changes {
                for change in batch {
                    if case .message(let m) = change.object, m.isSent { sent.sent(m.id) }
                }
            }
        }
        defer { watcher.cancel() }
        let dev = node.dev
        try await alice.connect { nonce in try dev.mintToken(user: "bench-alice", nonce: nonce) }
        let conversation = try alice.newConversation(
            participants: ["bench-bob"], options: ConversationOptions(isDistinct: false)
        ).id
        _ = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "hello")]), in: conversation).id
        try await sent.wait(untilDone: 1)  // the conversation is on the node before measuring

        let text = String(repeating: "x", count: 100)
        let cpuBefore = BenchSupport.cpuSeconds(getpid())
        let switchesBefore = Self.contextSwitches()
        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<messages {
            if index >= window { try await sent.wait(untilDone: 1 + index - window + 1) }
            try alice.send(alice.newMessage(parts: [MessagePart.with(text: text)]), in: conversation)
        }
        try await sent.wait(untilDone: 1 + messages)
        let elapsed = clock.now - start
        let cpu = BenchSupport.cpuSeconds(getpid()) - cpuBefore
        let switches = Self.contextSwitches() - switchesBefore
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            "lamina sdk-send: messages=\(messages) window=\(window) seconds=\(String(format: "%.2f", seconds))"
                + " sends_per_s=\(Int(Double(messages) / seconds))"
                + " client_cpu_us_per_send=\(String(format: "%.1f", cpu * 1e6 / Double(messages)))"
                + " context_switches_per_send=\(String(format: "%.2f", Double(switches) / Double(messages)))"
                + " node_cpu_us_per_send=\(String(format: "%.1f", node.cpuSeconds() * 1e6 / Double(messages + 1)))")
        try await alice.close()
    }

    /// Voluntary plus involuntary context switches of this process so far (every thread,
    /// exited ones too).
    static func contextSwitches() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_nvcsw + usage.ru_nivcsw
    }
}

/// The messages the store reports sent, and callers waiting for a count of them.
private final class SentMessages: Sendable {
    private struct State {
        var ids: Set<MessageID> = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = NIOLockedValueBox(State())

    func sent(_ id: MessageID) {
        let ready = state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
            guard s.ids.insert(id).inserted else { return [] }
            let count = s.ids.count
            let ready = s.waiters.filter { $0.count <= count }.map(\.continuation)
            s.waiters.removeAll { $0.count <= count }
            return ready
        }
        for c in ready { c.resume() }
    }

    /// Returns once at least `count` messages are sent.
    func wait(untilDone count: Int) async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { s -> Bool in
                if s.ids.count >= count { return true }
                s.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}
