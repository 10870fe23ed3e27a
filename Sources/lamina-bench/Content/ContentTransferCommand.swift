import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Flow control under a large transfer (issue 7 point 3): a real node, one TLS + HTTP/2
/// connection carrying a user's sync stream and the content streams; messages at a steady
/// rate on the sync stream while a part uploads and downloads on the same connection.
struct ContentTransferCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "content-transfer",
        abstract:
            "Upload and download a part on the sync stream's connection; report MB/s and message latency with and without the transfer."
    )

    @Option(help: "Size of the part in MiB (at most 2048).") var sizeMb = 1024
    @Option(help: "Messages per second on the sync stream during each phase.") var rate = 20
    @Option(help: "Seconds of the phase without transfer.") var baselineSeconds = 10
    @Option(help: "Bytes per upload write.") var chunkKb = 256
    @Option(help: "Node event loop threads.") var nodeThreads = 1
    @Option(help: "Upload + download rounds (more latency samples during transfer).") var rounds = 1
    @Option(help: "MiB an upload writes between two progress fsyncs (the node's uploadSyncIntervalBytes).")
    var syncIntervalMb = 8

    func run() async throws {
        guard (1...2048).contains(sizeMb) else { throw ValidationError("--size-mb must be 1...2048") }
        let nodeGroup = MultiThreadedEventLoopGroup(numberOfThreads: nodeThreads)
        let clientGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = NodeServerConfiguration()
        configuration.port = 0
        configuration.adminPort = -1
        configuration.content.uploadSyncIntervalBytes = syncIntervalMb << 20
        configuration.dataDirectory =
            try BenchSupport.temporaryDirectory() + "/content-transfer-\(UUID().uuidString.prefix(8))"
        var logger = Logger(label: "lamina.bench.content")
        logger.logLevel = .warning
        let node = try await NodeServer.start(configuration: configuration, group: nodeGroup, logger: logger)
        defer { try? FileManager.default.removeItem(atPath: configuration.dataDirectory) }
        let dev = node.prepared.devIdentityProvider!
        let alice: UserID = "bench-alice"
        let bob: UserID = "bench-bob"

        // Alice: one connection for her sync stream and her content streams. Bob: the fan-out.
        let aliceClient = try await BenchSyncClient.connect(
            url: node.url, caFile: node.prepared.certificatePath, group: clientGroup)
        let token = try await Self.login(aliceClient, user: alice, dev: dev)
        let bobClient = try await BenchSyncClient.connect(
            url: node.url, caFile: node.prepared.certificatePath, group: clientGroup)
        try await bobClient.login(user: bob, device: UUID(), dev: dev, cursor: 0)
        let conversation = ConversationID.random()
        let created = try await aliceClient.request(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: [alice, bob],
                    options: ConversationOptions(isDistinct: false))),
            id: conversation.uuid
        ).get()
        guard case .ack = created else { throw BenchFailure("create conversation: \(created)") }
        let probe = LatencyProbe()
        try await bobClient.observe { frame in probe.fanOut(frame) }
        try await aliceClient.observe { frame in probe.pong(frame) }

        let content = try GeneratedContent(size: UInt64(sizeMb) << 20)
        let digestStart = ContinuousClock.now
        let digest = try content.sha256()
        print(
            "content-transfer: \(sizeMb) MiB part, \(rate) messages/s on the same connection's sync stream, node threads \(nodeThreads), progress fsync every \(syncIntervalMb) MiB"
        )
        print(String(format: "  (digest of the generated part: %.1f s)", (ContinuousClock.now - digestStart).seconds))

        // (a) without transfer.
        let baseline = try await Self.sendMessages(
            aliceClient, conversation, rate: rate, probe: probe, until: ContinuousClock.now + .seconds(baselineSeconds))
        Self.report("no transfer", baseline, probe: probe, phase: nil)
        var uploadAcks: [Duration] = []
        var downloadAcks: [Duration] = []

        var verified = true
        for round in 1...rounds {
            // (b) upload while sending.
            probe.phase = 1
            let id = ContentID.random()
            let uploadStart = ContinuousClock.now
            let upload = Task {
                try await Self.upload(
                    aliceClient.connection, token: token, id: id, content: content, digest: digest, chunk: chunkKb << 10
                )
            }
            let duringUpload = try await Self.sendMessages(
                aliceClient, conversation, rate: rate, probe: probe, until: upload)
            let uploadStatus = try await upload.value
            let uploadSeconds = (ContinuousClock.now - uploadStart).seconds
            guard uploadStatus == "201" else { throw BenchFailure("upload answered \(uploadStatus)") }
            uploadAcks += duringUpload
            Self.report(
                String(
                    format: "round %d: upload %.1f MB/s (%.1f s)", round, Double(content.size) / 1e6 / uploadSeconds,
                    uploadSeconds),
                duringUpload, probe: probe, phase: nil)

            // (c) download while sending.
            probe.phase = 2
            let downloadStart = ContinuousClock.now
            let download = Task { try await Self.download(aliceClient.connection, token: token, id: id) }
            let duringDownload = try await Self.sendMessages(
                aliceClient, conversation, rate: rate, probe: probe, until: download)
            let (status, bytes, received) = try await download.value
            let downloadSeconds = (ContinuousClock.now - downloadStart).seconds
            guard status == "200", bytes == content.size else {
                throw BenchFailure("download: status \(status ?? "-"), \(bytes) bytes")
            }
            if received != digest { verified = false }
            downloadAcks += duringDownload
            Self.report(
                String(
                    format: "round %d: download %.1f MB/s (%.1f s), SHA-256 %@", round,
                    Double(bytes) / 1e6 / downloadSeconds,
                    downloadSeconds, received == digest ? "verified" : "MISMATCH"), duringDownload, probe: probe,
                phase: nil)
            // The node's copy goes (quota), not measured.
            _ = try await node.store.write { tx in try tx.deleteUpload(id) }
            node.content.files.remove(id)
        }
        print("  all rounds:")
        Self.report("no transfer", baseline, probe: probe, phase: 0)
        Self.report("during uploads", uploadAcks, probe: probe, phase: 1)
        Self.report("during downloads", downloadAcks, probe: probe, phase: 2)

        await aliceClient.close()
        await bobClient.close()
        await node.shutdown()
        try await nodeGroup.shutdownGracefully()
        try await clientGroup.shutdownGracefully()
        if !verified { throw BenchFailure("the downloaded bytes do not hash to the uploaded digest") }
    }

    /// Login on the sync stream; the session token (for the content streams).
    static func login(_ client: BenchSyncClient, user: UserID, dev: DevIdentityProvider) async throws -> String {
        try await client.hello()
        let nonceID = UUID()
        guard
            case .nonce(let nonce) = try await client.request(
                .nonceRequest(NonceRequest(requestID: nonceID)), id: nonceID
            ).get()
        else { throw BenchFailure("no NONCE") }
        let authID = UUID()
        let identity = try dev.mintToken(user: user, nonce: nonce.nonce)
        let answer = try await client.request(
            .authenticate(Authenticate(requestID: authID, identityToken: identity, deviceID: UUID())), id: authID
        ).get()
        guard case .authenticated(let authenticated) = answer else {
            throw BenchFailure("authentication failed: \(answer)")
        }
        let syncID = UUID()
        guard case .ack = try await client.request(.sync(SyncRequest(requestID: syncID, cursor: 0)), id: syncID).get()
        else { throw BenchFailure("SYNC not acknowledged") }
        return authenticated.sessionToken
    }

    /// Sends messages at `rate` per second until `deadline`; ACK latencies.
    static func sendMessages(
        _ client: BenchSyncClient, _ conversation: ConversationID, rate: Int, probe: LatencyProbe,
        until deadline: ContinuousClock.Instant
    ) async throws -> [Duration] {
        try await sendMessages(client, conversation, rate: rate, probe: probe) { ContinuousClock.now >= deadline }
    }

    static func sendMessages<T>(
        _ client: BenchSyncClient, _ conversation: ConversationID, rate: Int, probe: LatencyProbe,
        until task: Task<T, Error>
    ) async throws -> [Duration] {
        let finished = NIOLockedValueBox(false)
        let watcher = Task {
            _ = try? await task.value
            finished.withLockedValue { $0 = true }
        }
        defer { watcher.cancel() }
        return try await sendMessages(client, conversation, rate: rate, probe: probe) {
            finished.withLockedValue { $0 }
        }
    }

    static func sendMessages(
        _ client: BenchSyncClient, _ conversation: ConversationID, rate: Int, probe: LatencyProbe, stop: () -> Bool
    ) async throws -> [Duration] {
        let interval = Duration.nanoseconds(1_000_000_000 / max(1, rate))
        var next = ContinuousClock.now
        var acks: [EventLoopFuture<Duration>] = []
        let parts = [try MessagePart(text: "ping")]
        while !stop() {
            let id = MessageID.random()
            let start = ContinuousClock.now
            probe.sent(id, at: start)
            client.send(.ping(Ping(payload: probe.pingSent(at: start))))
            acks.append(
                client.request(
                    .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts)), id: id.uuid
                )
                .flatMapThrowing { frame -> Duration in
                    guard case .ack = frame else { throw BenchFailure("not acknowledged: \(frame)") }
                    return ContinuousClock.now - start
                })
            next += interval
            try await Task.sleep(until: next, clock: .continuous)
        }
        var latencies: [Duration] = []
        for ack in acks { latencies.append(try await ack.get()) }
        try await probe.awaitFanOut(count: acks.count)
        return latencies
    }

    /// PUT of the generated part on `connection`, streamed with a few writes in flight; the status.
    static func upload(
        _ connection: TransportConnection, token: String, id: ContentID, content: GeneratedContent, digest: [UInt8],
        chunk: Int
    ) async throws -> String {
        let stream = try await connection.openStream(
            method: "PUT", path: "/v1/content/\(id.uuid.uuidString.lowercased())",
            headers: [
                ("authorization", "Bearer \(token)"), ("lamina-content-size", "\(content.size)"),
                ("lamina-content-sha256", digest.map { String(format: "%02x", $0) }.joined()),
            ],
            endStream: false)
        let answer = stream.collect(maxBytes: 64 * 1024)
        var inFlight: [EventLoopFuture<Void>] = []
        var offset: UInt64 = 0
        while offset < content.size {
            let within = Int(offset & ((1 << 20) - 1))
            let count = Int(min(UInt64(min(chunk, (1 << 20) - within)), content.size - offset))
            let buffer = content.chunk(at: offset, count: count)
            inFlight.append(stream.write(buffer))
            offset += UInt64(count)
            if inFlight.count >= 4 { try await inFlight.removeFirst().get() }
        }
        for future in inFlight { try await future.get() }
        stream.finish()
        let (headers, body) = try await answer.get()
        let status = headers?[":status"] ?? "-"
        if status != "201" { print("  upload answer: \(status) \(String(buffer: body))") }
        return status
    }

    /// GET of the content on `connection`: status, bytes and their SHA-256 (hashed off the event loop).
    static func download(_ connection: TransportConnection, token: String, id: ContentID) async throws
        -> (String?, UInt64, [UInt8])
    {
        let stream = try await connection.openStream(
            method: "GET", path: "/v1/content/\(id.uuid.uuidString.lowercased())",
            headers: [("authorization", "Bearer \(token)")],
            endStream: true)
        let sink = try DownloadSink(eventLoop: stream.eventLoop)
        try await stream.eventLoop.submit { stream.delegate = sink }.get()
        let result = try await sink.done.futureResult.get()
        return (result.status, result.bytes, result.sha256)
    }

    /// Prints a phase; `phase` nil: the fan-out and PING samples since the last report.
    static func report(_ title: String, _ acks: [Duration], probe: LatencyProbe, phase: Int?) {
        let (fanOut, pings) = phase.map { probe.latencies(phase: $0) } ?? probe.takeRecent()
        print("  \(title)")
        print("    messages: \(acks.count)  send->ACK \(LatencyProbe.summary(acks))")
        print("    send->fan-out \(LatencyProbe.summary(fanOut))")
        print("    PING->PONG \(LatencyProbe.summary(pings))")
    }
}

/// Send times by message id and the fan-out latencies seen on the recipient's stream, and the
/// PING round trips on the sender's stream, per phase.
final class LatencyProbe: @unchecked Sendable {
    private struct State {
        var sent: [MessageID: (ContinuousClock.Instant, Int)] = [:]
        var fanOut: [Int: [Duration]] = [:]
        var pings: [UInt64: (ContinuousClock.Instant, Int)] = [:]
        var pingRTT: [Int: [Duration]] = [:]
        var nextPing: UInt64 = 1
        var recentFanOut: [Duration] = []
        var recentPings: [Duration] = []
    }
    private let state = NIOLockedValueBox(State())
    private let phaseBox = NIOLockedValueBox(0)
    var phase: Int {
        get { phaseBox.withLockedValue { $0 } }
        set { phaseBox.withLockedValue { $0 = newValue } }
    }

    func sent(_ id: MessageID, at instant: ContinuousClock.Instant) {
        let phase = self.phase
        state.withLockedValue { $0.sent[id] = (instant, phase) }
    }

    /// A new PING payload, timed from `instant`.
    func pingSent(at instant: ContinuousClock.Instant) -> UInt64 {
        let phase = self.phase
        return state.withLockedValue { s in
            let payload = s.nextPing
            s.nextPing += 1
            s.pings[payload] = (instant, phase)
            return payload
        }
    }

    func pong(_ frame: Frame) {
        let now = ContinuousClock.now
        guard case .pong(let ping) = frame else { return }
        state.withLockedValue { s in
            guard let (start, phase) = s.pings.removeValue(forKey: ping.payload) else { return }
            s.pingRTT[phase, default: []].append(now - start)
            s.recentPings.append(now - start)
        }
    }

    func fanOut(_ frame: Frame) {
        let now = ContinuousClock.now
        let changes: [Change]
        switch frame {
        case .change(let change): changes = [change]
        case .changeBatch(let batch): changes = batch.changes
        default: return
        }
        for change in changes {
            guard case .messageCreated(let message) = change.event else { continue }
            state.withLockedValue { s in
                guard let (start, phase) = s.sent.removeValue(forKey: message.id) else { return }
                s.fanOut[phase, default: []].append(now - start)
                s.recentFanOut.append(now - start)
            }
        }
    }

    /// The samples since the last call.
    func takeRecent() -> ([Duration], [Duration]) {
        state.withLockedValue { s in
            defer {
                s.recentFanOut = []
                s.recentPings = []
            }
            return (s.recentFanOut, s.recentPings)
        }
    }

    /// Waits (bounded) until the recipient has seen every message sent so far.
    func awaitFanOut(count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while state.withLockedValue({ !$0.sent.isEmpty }) {
            guard ContinuousClock.now < deadline else {
                throw BenchFailure("fan-out missing for \(state.withLockedValue { $0.sent.count }) messages")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func latencies(phase: Int) -> ([Duration], [Duration]) {
        state.withLockedValue { ($0.fanOut[phase] ?? [], $0.pingRTT[phase] ?? []) }
    }

    static func summary(_ values: [Duration]) -> String {
        guard !values.isEmpty else { return "-" }
        let sorted = values.sorted()
        func ms(_ d: Duration) -> String { String(format: "%.2f", d.seconds * 1e3) }
        return
            "p50 \(ms(sorted[sorted.count / 2])) ms  p99 \(ms(sorted[min(sorted.count - 1, sorted.count * 99 / 100)])) ms  max \(ms(sorted[sorted.count - 1])) ms"
    }
}
