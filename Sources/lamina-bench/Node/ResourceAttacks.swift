import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// What the phases of `lamina-bench resources` found, for the one summary line.
final class ResourcesSummary: @unchecked Sendable {
    private let lock = NIOLock()
    private var parts: [String] = []
    private var largest: (label: String, bytes: Int)?

    /// A figure of its own (per session, per stream, a delivery).
    func add(_ part: String) { lock.withLock { parts.append(part) } }

    /// The node's RSS peak under an attack; the summary names the largest.
    func peak(_ attack: String, _ bytes: Int) {
        lock.withLock {
            if bytes > largest?.bytes ?? -1 { largest = (attack, bytes) }
        }
    }

    func line() -> String {
        lock.withLock {
            var all = parts
            if let largest {
                all.append("largest RSS under attack \(ResourcesCommand.mib(largest.bytes)) (\(largest.label))")
            }
            return all.isEmpty ? "nothing measured" : all.joined(separator: "; ")
        }
    }
}

extension ResourcesCommand {
    typealias Summary = ResourcesSummary

    /// Samples the node's RSS every 100 ms until cancelled; the peak.
    static func peakSampler(_ p: Phase) -> Task<Int, Never> {
        Task {
            var peak = p.rss()
            while !Task.isCancelled {
                peak = max(peak, p.rss())
                try? await Task.sleep(for: .milliseconds(100))
            }
            return max(peak, p.rss())
        }
    }

    /// Like ``peakSampler(_:)``: the peak RSS, and the peak of its part not backed by files
    /// (heap and stacks; the store's memory-mapped pages are the file-backed rest).
    static func peakSplitSampler(_ p: Phase) -> Task<(rss: Int, anonymous: Int), Never> {
        Task {
            var peak = (rss: 0, anonymous: 0)
            repeat {
                let rss = p.rss()
                peak = (max(peak.rss, rss), max(peak.anonymous, rss - p.rssFile()))
                try? await Task.sleep(for: .milliseconds(100))
            } while !Task.isCancelled
            return peak
        }
    }

    /// A healthy member's login and round trip to itself after an attack (the node still serves).
    static func healthyLogin(_ p: Phase) async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        let client = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await client.login(user: "healthy", device: UUID(), dev: p.dev, cursor: 0)
        await client.close()
        return clock.now - start
    }

    /// Item 2: connections of 100 streams each sending HELLO and PING (the node admits 1,000
    /// unauthenticated sessions; the rest are refused `overloaded`), held while measured.
    func slotFlood(_ p: Phase, _ summary: Summary) async throws {
        let sampler = Self.peakSampler(p)
        let tls = try p.tls()
        var connections: [TransportConnection] = []
        var refused = 0
        var admitted = 0
        for _ in 0..<slotConnections {
            let connection = try await TransportConnection.connect(to: p.url, tls: tls, group: p.group)
            connections.append(connection)
            for _ in 0..<100 {
                let stream = try await BenchSyncClient.open(on: connection)
                do {
                    try await stream.hello()
                    stream.send(.ping(Ping(payload: 1)))
                    admitted += 1
                } catch { refused += 1 }
            }
        }
        try await p.settle()
        let login = try await Self.healthyLogin(p)
        sampler.cancel()
        let peak = await sampler.value
        print(
            "slots: \(admitted) streams admitted, \(refused) refused on \(connections.count) connections; peak RSS \(Self.mib(peak)); a healthy login meanwhile \(login)"
        )
        summary.peak("unauthenticated slots", peak)
        for connection in connections { try? await connection.close() }
    }

    /// The paused-window attack: unauthenticated streams (8 per connection) each send HELLO and
    /// `windowBytes` of PINGs at once, reading the PONGs; every DATA chunk holds about 1,000 of them,
    /// so the stream pauses after each and what the client sent meanwhile waits in its window.
    func windowFlood(_ p: Phase, _ summary: Summary) async throws {
        let sampler = Self.peakSampler(p)
        let tls = try p.tls()
        var streams: [BenchSyncClient] = []
        var connections: [TransportConnection] = []
        while streams.count < floodStreams {
            let connection = try await TransportConnection.connect(to: p.url, tls: tls, group: p.group)
            connections.append(connection)
            for _ in 0..<min(8, floodStreams - streams.count) {
                let stream = try await BenchSyncClient.open(on: connection)
                try await stream.hello()
                streams.append(stream)
            }
        }
        var pings = ByteBuffer()
        for i in 0..<(windowBytes / 16) { try Frame.ping(Ping(payload: UInt64(i))).encode(into: &pings) }
        let start = p.rss()
        for stream in streams { stream.stream.write(pings, promise: nil) }
        // Until every stream was answered (or ended: the authentication deadline is 30 s).
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline,
            streams.contains(where: {
                $0.bytesReceived.withLockedValue { $0 } < windowBytes && $0.failure.withLockedValue { $0 } == nil
            })
        {
            try await Task.sleep(for: .milliseconds(200))
        }
        let login = try await Self.healthyLogin(p)
        sampler.cancel()
        let peak = await sampler.value
        print(
            "windows: \(streams.count) unauthenticated streams each sending \(windowBytes / 1_024) KiB of PINGs: RSS \(Self.mib(start)) -> peak \(Self.mib(peak)) (\(Self.kib(peak - start, per: streams.count)) a stream); a healthy login meanwhile \(login)"
        )
        summary.peak("paused unauthenticated windows", peak)
        for connection in connections { try? await connection.close() }
    }

    /// Item 6: unauthenticated streams (8 per connection) ask for nonces until refused.
    func nonceFlood(_ p: Phase, _ summary: Summary) async throws {
        let sampler = Self.peakSampler(p)
        let tls = try p.tls()
        var connections: [TransportConnection] = []
        var issued = 0
        var refused = 0
        var streams = 0
        while streams < floodStreams {
            let connection = try await TransportConnection.connect(to: p.url, tls: tls, group: p.group)
            connections.append(connection)
            for _ in 0..<min(8, floodStreams - streams) {
                streams += 1
                let stream = try await BenchSyncClient.open(on: connection)
                try await stream.hello()
                asking: for _ in 0..<8 {
                    let id = UUID()
                    switch try? await stream.request(.nonceRequest(NonceRequest(requestID: id)), id: id).get() {
                    case .nonce?: issued += 1
                    default:
                        refused += 1
                        break asking
                    }
                }
            }
        }
        let login = try await Self.healthyLogin(p)
        sampler.cancel()
        let peak = await sampler.value
        print(
            "nonces: \(streams) streams on \(connections.count) connections asked: \(issued) issued, \(refused) refused; peak RSS \(Self.mib(peak)); a healthy login meanwhile \(login)"
        )
        summary.peak("nonce requests", peak)
        for connection in connections { try? await connection.close() }
    }

    /// Item 7: TLS connections that open no stream (closed by the node after its idle timeout).
    func idleConnectionFlood(_ p: Phase, _ summary: Summary) async throws {
        let sampler = Self.peakSampler(p)
        let tls = try p.tls()
        var connections: [TransportConnection] = []
        for _ in 0..<idleConnections {
            connections.append(try await TransportConnection.connect(to: p.url, tls: tls, group: p.group))
        }
        try await p.settle()
        let login = try await Self.healthyLogin(p)
        sampler.cancel()
        let peak = await sampler.value
        print(
            "idle connections: \(connections.count) after the TLS handshake: peak RSS \(Self.mib(peak)); a healthy login meanwhile \(login)"
        )
        summary.peak("idle connections", peak)
        for connection in connections { try? await connection.close() }
    }

    /// Item 9: header-only 1 GiB uploads that send no byte (answered 408 after the stall
    /// timeout), 8 per user.
    func stalledUploadFlood(_ p: Phase, _ summary: Summary) async throws {
        let sampler = Self.peakSampler(p)
        var clients: [BenchSyncClient] = []
        var answers: [EventLoopFuture<(headers: HeaderFields?, body: ByteBuffer)>] = []
        for user in 0..<max(1, stalledUploads / 8) {
            let client = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
            clients.append(client)
            let token = try await ContentTransferCommand.login(client, user: UserID("uploader\(user)"), dev: p.dev)
            for _ in 0..<8 {
                let stream = try await client.connection.openStream(
                    method: "PUT", path: "/v1/content/\(UUID().uuidString.lowercased())",
                    headers: [
                        ("authorization", "Bearer \(token)"), ("lamina-content-size", "\(1_073_741_824)"),
                        ("lamina-content-sha256", String(repeating: "ab", count: 32)),
                    ],
                    endStream: false)
                answers.append(stream.collect(maxBytes: 64 * 1_024))
            }
        }
        var statuses: [String: Int] = [:]
        for answer in answers {
            let status = (try? await answer.get()).flatMap { $0.headers?[":status"] } ?? "reset"
            statuses[status, default: 0] += 1
        }
        let login = try await Self.healthyLogin(p)
        sampler.cancel()
        let peak = await sampler.value
        print(
            "stalled uploads: \(answers.count) header-only 1 GiB uploads answered \(statuses.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: ", ")); peak RSS \(Self.mib(peak)); a healthy login after \(login)"
        )
        summary.peak("stalled uploads", peak)
        for client in clients { await client.close() }
    }

    // MARK: large answers to a slow reader

    /// Lets `client` take at most `rate` bytes a second (pausing its stream, which stops its
    /// window updates) until the returned task is cancelled. Runs on the stream's event loop
    /// (a loaded cooperative pool must not let the reader run ahead).
    static func readSlowly(_ client: BenchSyncClient, rate: Int) -> RepeatedTask {
        let stream = client.stream
        let start = NIODeadline.now()
        let base = client.bytesReceived.withLockedValue { $0 }
        let paused = NIOLockedValueBox(false)
        return stream.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(5)) { _ in
            let elapsed = Double((NIODeadline.now() - start).nanoseconds) / 1e9
            let over = Double(client.bytesReceived.withLockedValue { $0 } - base) >= Double(rate) * elapsed
            paused.withLockedValue { paused in
                if over, !paused { stream.pauseInbound() } else if !over, paused { stream.resumeInbound() }
                paused = over
            }
        }
    }

    /// `megabytes` of 33 KB messages from `sender` to a new conversation with `member`; their ids.
    static func seed(_ sender: BenchSyncClient, with member: UserID, megabytes: Int) async throws -> (
        ConversationID, Set<MessageID>
    ) {
        let conversation = ConversationID.random()
        _ = try await sender.request(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["sender", member],
                    options: ConversationOptions(isDistinct: false))),
            id: conversation.uuid
        ).get()
        let parts = try (0..<16).map { _ in try MessagePart(text: String(repeating: "h", count: 2_048)) }
        let count = max(1, megabytes * 1_000_000 / 33_000)
        var sent: Set<MessageID> = []
        var inFlight: [EventLoopFuture<Frame>] = []
        for _ in 0..<count {
            let id = MessageID.random()
            sent.insert(id)
            inFlight.append(
                sender.request(
                    .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts)), id: id.uuid))
            if inFlight.count >= 32 {
                guard case .ack = try await inFlight.removeFirst().get() else {
                    throw BenchFailure("a seeded message was refused")
                }
            }
        }
        for future in inFlight {
            guard case .ack = try await future.get() else { throw BenchFailure("a seeded message was refused") }
        }
        return (conversation, sent)
    }

    /// Counts the messages of history or backlog frames `client` observes.
    static func countMessages(_ client: BenchSyncClient) async throws -> NIOLockedValueBox<Set<MessageID>> {
        let seen = NIOLockedValueBox<Set<MessageID>>([])
        try await client.observe { frame in
            let changes: [Change]
            switch frame {
            case .change(let c): changes = [c]
            case .changeBatch(let b): changes = b.changes
            default: return
            }
            let ids = changes.compactMap { c -> MessageID? in
                if case .messageCreated(let m) = c.event { m.id } else { nil }
            }
            if !ids.isEmpty { seen.withLockedValue { $0.formUnion(ids) } }
        }
        return seen
    }

    /// Items 4–5: the complete history of one conversation (`historyMB`) to a reader at
    /// `readRate`, then to `historyReaders` fast readers at once (peak RSS).
    func pacedHistory(_ p: Phase, _ summary: Summary) async throws {
        let sender = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await sender.login(user: "sender", device: UUID(), dev: p.dev, cursor: 0)
        let seeding = ContinuousClock.now
        let (conversation, sent) = try await Self.seed(sender, with: "historian", megabytes: historyMB)
        print("history: \(sent.count) messages seeded in \(ContinuousClock.now - seeding)")
        let reader = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await reader.login(user: "historian", device: UUID(), dev: p.dev)
        let seen = try await Self.countMessages(reader)
        let start = p.rss()
        let sampler = Self.peakSampler(p)
        let slow = Self.readSlowly(reader, rate: readRate)
        let clock = ContinuousClock()
        let began = clock.now
        let bytesBefore = reader.bytesReceived.withLockedValue { $0 }
        let id = UUID()
        let answer: Frame
        do {
            answer = try await reader.request(
                .fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: .complete)), id: id
            ).get()
        } catch {
            let got = seen.withLockedValue { $0.intersection(sent).count }
            print(
                "history: the \(readRate / 1_024) KiB/s reader failed after \(clock.now - began) with \(got) of \(sent.count) messages: \(error)"
            )
            throw error
        }
        let took = clock.now - began
        slow.cancel()
        reader.stream.resumeInbound()
        sampler.cancel()
        let slowPeak = await sampler.value
        let bytes = reader.bytesReceived.withLockedValue { $0 } - bytesBefore
        let got = seen.withLockedValue { $0.intersection(sent).count }
        guard case .ack = answer else { throw BenchFailure("history answered \(answer)") }
        let complete = got == sent.count
        print(
            "history: \(sent.count) messages (\(String(format: "%.1f", Double(bytes) / 1e6)) MB) to a \(readRate / 1_024) KiB/s reader: \(got) received in \(took) (\(Int(Double(bytes) / max(took.seconds, 0.001) / 1_024)) KiB/s, the stream window of 256 KiB included)\(complete ? ", complete" : ", INCOMPLETE"); RSS \(Self.mib(start)) -> peak \(Self.mib(slowPeak))"
        )
        summary.add(
            "history \(String(format: "%.1f", Double(bytes) / 1e6)) MB to a \(readRate / 1_024) KiB/s reader \(complete ? "complete" : "INCOMPLETE") in \(String(format: "%.0f", took.seconds)) s"
        )
        await reader.close()
        await sender.close()
        // Fast readers together, a round per count, then the streams that read nothing: each
        // on a fresh node process over the same data, so no round measures what the allocator
        // kept from the one before.
        var node = p
        for count in historyReaders.split(separator: ",").compactMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) {
            node = try await node.restarted()
            try await fastReaders(count, node, conversation, sent, summary)
        }
        node = try await node.restarted()
        try await unreadAnswers(node, conversation, summary)
    }

    /// `count` readers (one connection each) fetch the complete history at once, read as fast as
    /// it comes: each answer complete, the node's peak RSS growth, each reader's throughput.
    private func fastReaders(
        _ count: Int, _ p: Phase, _ conversation: ConversationID, _ sent: Set<MessageID>, _ summary: Summary
    ) async throws {
        // The readers log in first (their sessions are not the answers' memory).
        let clients = try await withThrowingTaskGroup(of: (BenchSyncClient, NIOLockedValueBox<Set<MessageID>>).self) {
            group in
            for _ in 0..<count {
                group.addTask {
                    let fast = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
                    try await fast.login(user: "historian", device: UUID(), dev: p.dev)
                    return (fast, try await Self.countMessages(fast))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await p.settle()
        let before = p.rss()
        let beforeFile = p.rssFile()
        let sampler = Self.peakSplitSampler(p)
        let clock = ContinuousClock()
        let began = clock.now
        let results = try await withThrowingTaskGroup(of: (Int, Int, Duration).self) { group in
            for (fast, seen) in clients {
                group.addTask {
                    let id = UUID()
                    let start = ContinuousClock.now
                    let bytesBefore = fast.bytesReceived.withLockedValue { $0 }
                    _ = try await fast.request(
                        .fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: .complete)),
                        id: id
                    ).get()
                    let took = ContinuousClock.now - start
                    let bytes = fast.bytesReceived.withLockedValue { $0 } - bytesBefore
                    let got = seen.withLockedValue { $0.intersection(sent).count }
                    await fast.close()
                    return (got, bytes, took)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let took = clock.now - began
        sampler.cancel()
        let peaks = await sampler.value
        let peak = peaks.rss
        let complete = results.filter { $0.0 == sent.count }.count
        let rates = results.map { Double($0.1) / max($0.2.seconds, 0.001) / 1e6 }.sorted()
        let growth = peak - before
        let anonymousGrowth = peaks.anonymous - (before - beforeFile)
        print(
            "  \(count) fast readers at once (fresh node, logged in first): \(complete) of \(count) complete in \(took); RSS \(Self.mib(before)) -> peak \(Self.mib(peak)) (growth \(Self.mib(growth)), of it not file-backed \(Self.mib(anonymousGrowth)); file-backed \(Self.mib(beforeFile)) -> \(Self.mib(p.rssFile()))); per reader \(String(format: "%.1f", rates.first ?? 0))–\(String(format: "%.1f", rates.last ?? 0)) MB/s (median \(String(format: "%.1f", rates.isEmpty ? 0 : rates[rates.count / 2])))"
        )
        summary.add(
            "\(count) history readers: \(complete)/\(count) complete, RSS growth \(Self.mib(growth)) (anonymous \(Self.mib(anonymousGrowth))), median \(String(format: "%.1f", rates.isEmpty ? 0 : rates[rates.count / 2])) MB/s each"
        )
        summary.peak("\(count) history fetches of \(historyMB) MB", peak)
    }

    /// `unreadStreams` streams on one connection each ask for the complete history and read
    /// nothing: the node's RSS growth, and how long until every stream was cut.
    private func unreadAnswers(_ p: Phase, _ conversation: ConversationID, _ summary: Summary) async throws {
        try await p.settle()
        let before = p.rss()
        let sampler = Self.peakSampler(p)
        let connection = try await TransportConnection.connect(to: p.url, tls: try p.tls(), group: p.group)
        var answers: [EventLoopFuture<Frame>] = []
        for _ in 0..<unreadStreams {
            let stream = try await BenchSyncClient.open(on: connection)
            try await stream.login(user: "historian", device: UUID(), dev: p.dev)
            stream.stream.pauseInbound()
            let id = UUID()
            answers.append(
                stream.request(
                    .fetchHistory(FetchHistory(requestID: id, conversationID: conversation, policy: .complete)), id: id)
            )
        }
        let clock = ContinuousClock()
        let began = clock.now
        let cut = NIOLockedValueBox<[Duration]>([])
        for answer in answers {
            answer.whenComplete { _ in cut.withLockedValue { $0.append(clock.now - began) } }
        }
        let deadline = clock.now + .seconds(600)
        while cut.withLockedValue({ $0.count }) < answers.count, clock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
        }
        sampler.cancel()
        let peak = await sampler.value
        let times = cut.withLockedValue { $0 }.sorted()
        let login = try await Self.healthyLogin(p)
        print(
            "  \(unreadStreams) streams that read nothing: \(times.count) cut, the first after \(times.first.map { "\($0)" } ?? "-"), the last after \(times.last.map { "\($0)" } ?? "-"); RSS \(Self.mib(before)) -> peak \(Self.mib(peak)) (growth \(Self.mib(peak - before))); a healthy login then \(login)"
        )
        summary.add(
            "\(unreadStreams) unread history streams: growth \(Self.mib(peak - before)), \(times.count) of \(unreadStreams) seen cut"
                + (times.last.map { String(format: ", the last after %.0f s", $0.seconds) } ?? "")
        )
        try? await connection.close()
    }

    /// Item 4: a SYNC backlog of `backlogMB` to a reader at `readRate`: a device synced once,
    /// went offline while the messages came, and syncs from its cursor (from cursor 0 a new
    /// device would get a snapshot instead, SPEC §6.3).
    func pacedBacklog(_ p: Phase, _ summary: Summary) async throws {
        let device = UUID()
        let first = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await first.login(user: "returner", device: device, dev: p.dev)
        let firstSync = UUID()
        guard
            case .ack(let synced) = try await first.request(
                .sync(SyncRequest(requestID: firstSync, cursor: 0)), id: firstSync
            ).get()
        else { throw BenchFailure("the first SYNC was not acknowledged") }
        await first.close()
        let sender = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await sender.login(user: "sender", device: UUID(), dev: p.dev, cursor: 0)
        let (_, sent) = try await Self.seed(sender, with: "returner", megabytes: backlogMB)
        let reader = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await reader.login(user: "returner", device: device, dev: p.dev)
        let seen = try await Self.countMessages(reader)
        let sampler = Self.peakSampler(p)
        let slow = Self.readSlowly(reader, rate: readRate)
        let clock = ContinuousClock()
        let began = clock.now
        let bytesBefore = reader.bytesReceived.withLockedValue { $0 }
        let id = UUID()
        let answer: Frame
        do {
            answer = try await reader.request(.sync(SyncRequest(requestID: id, cursor: synced.cursor ?? 0)), id: id)
                .get()
        } catch {
            let got = seen.withLockedValue { $0.intersection(sent).count }
            print(
                "backlog: the \(readRate / 1_024) KiB/s reader failed after \(clock.now - began) with \(got) of \(sent.count) messages: \(error)"
            )
            throw error
        }
        let took = clock.now - began
        slow.cancel()
        reader.stream.resumeInbound()
        sampler.cancel()
        let peak = await sampler.value
        let bytes = reader.bytesReceived.withLockedValue { $0 } - bytesBefore
        let got = seen.withLockedValue { $0.intersection(sent).count }
        guard case .ack = answer else { throw BenchFailure("SYNC answered \(answer)") }
        let complete = got == sent.count
        print(
            "backlog: \(sent.count) messages (\(String(format: "%.1f", Double(bytes) / 1e6)) MB) to a \(readRate / 1_024) KiB/s reader: \(got) received in \(took) (\(Int(Double(bytes) / max(took.seconds, 0.001) / 1_024)) KiB/s, the stream window of 256 KiB included)\(complete ? ", complete" : ", INCOMPLETE"); peak RSS \(Self.mib(peak))"
        )
        summary.add(
            "SYNC backlog \(String(format: "%.1f", Double(bytes) / 1e6)) MB to a \(readRate / 1_024) KiB/s reader \(complete ? "complete" : "INCOMPLETE") in \(String(format: "%.0f", took.seconds)) s"
        )
        await reader.close()
        await sender.close()
    }
}
