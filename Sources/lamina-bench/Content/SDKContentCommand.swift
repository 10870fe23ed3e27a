import ArgumentParser
import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Logging
import NIOPosix

/// A large part SDK to SDK (issue 7): alice's `LaminaClient` stages and uploads it, bob's
/// downloads it, each on the connection its sync stream uses, while alice keeps sending
/// small messages to bob in another conversation. Reports staging, upload and download MB/s
/// and the messages' send-to-receive latency without a transfer, during the upload and
/// during the download.
struct SDKContentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sdk-content",
        abstract:
            "A part from one SDK client to another through a node; MB/s and message latency with and without the transfer."
    )

    @Option(help: "Size of the part in MiB (1...2048).") var sizeMb = 1024
    @Option(help: "Messages per second alice sends in the chat conversation.") var rate = 20
    @Option(help: "Messages of the phase without transfer.") var baselineMessages = 200

    func run() async throws {
        guard (1...2048).contains(sizeMb) else { throw ValidationError("--size-mb must be 1...2048") }
        guard (1...1_000).contains(rate) else { throw ValidationError("--rate must be 1...1000") }
        let root = try BenchSupport.temporaryDirectory() + "/sdk-content-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = -1
        configuration.dataDirectory = root + "/node"
        var logger = Logger(label: "lamina.bench.sdk-content")
        logger.logLevel = .warning
        let node = try await NodeServer.start(
            configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        let dev = node.prepared.devIdentityProvider!

        func client(_ user: UserID) throws -> LaminaClient {
            try LaminaClient(
                configuration: LaminaConfiguration(
                    nodeURL: URL(string: node.url)!,
                    trust: .certificateAuthorities(URL(fileURLWithPath: node.prepared.certificatePath)),
                    dataDirectory: URL(fileURLWithPath: root + "/clients")), user: user)
        }
        let alice = try client("bench-alice")
        let bob = try client("bench-bob")
        let arrivals = Arrivals()
        let watcher = Task { [changes = bob.changes()] in
            for await batch in changes {
                for change in batch where change.type == .create {
                    if case .message(let m) = change.object { arrivals.arrived(m.id) }
                }
            }
        }
        for c in [alice, bob] {
            let user = c.user
            try await c.connect { nonce in try dev.mintToken(user: user, nonce: nonce) }
        }
        let media = try alice.newConversation(participants: [bob.user], options: ConversationOptions(isDistinct: false))
            .id
        let chat = try alice.newConversation(participants: [bob.user], options: ConversationOptions(isDistinct: false))
            .id
        for c in [media, chat] {  // both conversations reach the node and bob before measuring
            let id = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "hello")]), in: c).id
            try await arrivals.wait(for: id, timeout: .seconds(30))
        }

        let probe = Probe(
            alice: alice, conversation: chat, arrivals: arrivals, interval: .nanoseconds(1_000_000_000 / rate))
        Self.note("baseline: \(baselineMessages) messages at \(rate)/s")
        let baseline = try await probe.run(count: baselineMessages)
        let lostBaseline = probe.lost.take()

        // The part: a file of patterned bytes (not measured), staged (measured: copy + SHA-256).
        let size = UInt64(sizeMb) << 20
        let source = URL(fileURLWithPath: root + "/part.bin")
        try Self.writePattern(to: source, size: size)
        let clock = ContinuousClock()
        Self.note("staging \(sizeMb) MiB")
        let stagingStart = clock.now
        // in alice's data directory: send moves, not copies
        let part = try MessagePart.with(mimeType: "video/mp4", fileURL: source, staging: alice.staging)
        let staging = clock.now - stagingStart
        try? FileManager.default.removeItem(at: source)

        let events = alice.contentTransferEvents()
        Self.note("uploading")
        let uploadStart = clock.now
        let message = try alice.send(alice.newMessage(parts: [part]), in: media)
        let partID = message.message.identifier(of: part)
        let uploaded = Task {
            for await event in events {
                if case .completed(partID, .upload) = event { return clock.now }
                if case .failed(partID, .upload, let error) = event { throw error }
            }
            throw BenchFailure("the transfer events ended")
        }
        let duringUpload = try await probe.run(until: { uploaded })
        let lostUpload = probe.lost.take()
        let upload = try await uploaded.value - uploadStart
        Self.note("waiting for bob to receive the message")
        try await arrivals.wait(for: message.id, timeout: .seconds(120))
        Self.note("downloading")

        let downloadStart = clock.now
        let downloaded = Task { () throws -> ContinuousClock.Instant in
            _ = try await bob.downloadedContent(of: partID)
            return clock.now
        }
        let duringDownload = try await probe.run(until: { downloaded })
        let lostDownload = probe.lost.take()
        let download = try await downloaded.value - downloadStart
        Self.note("done")

        func mbps(_ d: Duration) -> String { String(format: "%.1f MB/s", Double(size) / 1e6 / Self.seconds(d)) }
        print(
            "sdk-content: \(sizeMb) MiB part alice -> bob through a node on loopback TLS + HTTP/2; chat messages at \(rate)/s"
        )
        print("  staging (copy + SHA-256): \(String(format: "%.2f s", Self.seconds(staging))) = \(mbps(staging))")
        print(
            "  upload (send -> on the node, verified): \(String(format: "%.2f s", Self.seconds(upload))) = \(mbps(upload))"
        )
        print(
            "  download (GET -> file, SHA-256 checked): \(String(format: "%.2f s", Self.seconds(download))) = \(mbps(download))"
        )
        print("  message latency alice send -> bob stored:")
        print("    without transfer: \(Self.summary(baseline)), never arrived \(lostBaseline)")
        print("    during upload:    \(Self.summary(duringUpload)), never arrived \(lostUpload)")
        print("    during download:  \(Self.summary(duringDownload)), never arrived \(lostDownload)")

        watcher.cancel()
        try await alice.close()
        try await bob.close()
        await node.shutdown()
    }

    /// A phase note on standard error.
    static func note(_ text: String) { FileHandle.standardError.write(Data("sdk-content: \(text)\n".utf8)) }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    static func summary(_ latencies: [Duration]) -> String {
        guard !latencies.isEmpty else { return "no samples" }
        let sorted = latencies.sorted()
        func ms(_ d: Duration) -> String { String(format: "%.1f ms", seconds(d) * 1e3) }
        return
            "n=\(sorted.count) p50 \(ms(sorted[sorted.count / 2])) p99 \(ms(sorted[min(sorted.count - 1, sorted.count * 99 / 100)])) max \(ms(sorted[sorted.count - 1]))"
    }

    static func writePattern(to url: URL, size: UInt64) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw BenchFailure("cannot create \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) })
        var left = size
        while left > 0 {
            let n = Int(min(left, UInt64(block.count)))
            try handle.write(contentsOf: block.prefix(n))
            left -= UInt64(n)
        }
    }
}

/// When bob's store got each expected message.
final class Arrivals: @unchecked Sendable {
    private let lock = NSLock()
    private var arrived: [MessageID: ContinuousClock.Instant] = [:]
    private var waiters: [MessageID: CheckedContinuation<Void, Never>] = [:]

    func arrived(_ id: MessageID) {
        let waiter = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            if arrived[id] == nil { arrived[id] = ContinuousClock.now }
            return waiters.removeValue(forKey: id)
        }
        waiter?.resume()
    }

    func time(of id: MessageID) -> ContinuousClock.Instant? { lock.withLock { arrived[id] } }

    /// Returns once `id` has arrived; throws after `timeout`.
    func wait(for id: MessageID, timeout: Duration) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Cancellable: the group waits for this child when the timeout child throws.
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        let now = self.lock.withLock { () -> Bool in
                            if self.arrived[id] != nil || Task.isCancelled { return true }
                            self.waiters[id] = c
                            return false
                        }
                        if now { c.resume() }
                    }
                } onCancel: {
                    self.lock.withLock { self.waiters.removeValue(forKey: id) }?.resume()
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw BenchFailure("message \(id) did not arrive within \(timeout)")
            }
            try await group.next()
            group.cancelAll()
        }
    }
}

/// Alice's chat messages at a steady rate; each one's send-to-bob-stored latency.
struct Probe {
    /// Messages sent that bob's store never got (within the drain time).
    let lost = Counter()
    let alice: LaminaClient
    let conversation: ConversationID
    let arrivals: Arrivals
    let interval: Duration

    func run(count: Int) async throws -> [Duration] {
        var sent = 0
        return try await run(until: {
            sent += 1
            return sent > count
        })
    }

    /// Sends until `task` has finished.
    func run<T: Sendable>(until task: () -> Task<T, any Error>) async throws -> [Duration] {
        let t = task()
        let done = Flag()
        Task {
            _ = try? await t.value
            done.set()
        }
        return try await run(until: { done.isSet })
    }

    /// Sends until `stop` says so (asked before each message), then waits for the last
    /// arrivals (at most `drain` in all). Messages that never arrive are counted in `lost`.
    func run(until stop: () -> Bool, drain: Duration = .seconds(20)) async throws -> [Duration] {
        var sent: [(MessageID, ContinuousClock.Instant)] = []
        while !stop() {
            let start = ContinuousClock.now
            let id = try alice.send(
                alice.newMessage(parts: [MessagePart.with(text: "ping \(sent.count)")]), in: conversation
            ).id
            sent.append((id, start))
            try await Task.sleep(for: interval)
        }
        SDKContentCommand.note("sent \(sent.count); waiting for their arrival")
        let deadline = ContinuousClock.now + drain
        for (id, _) in sent {
            let left = deadline - ContinuousClock.now
            if left <= .zero { break }
            try? await arrivals.wait(for: id, timeout: left)
        }
        let latencies = sent.compactMap { id, start in arrivals.time(of: id).map { $0 - start } }
        lost.add(sent.count - latencies.count)
        return latencies
    }
}

final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add(_ n: Int) { lock.withLock { value += n } }
    /// The count so far, reset to 0.
    func take() -> Int {
        lock.withLock {
            defer { value = 0 }
            return value
        }
    }
}
