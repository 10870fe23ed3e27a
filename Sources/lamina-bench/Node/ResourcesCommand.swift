import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Issue 15's figures, on a node in its own process (RSS read from /proc/<pid>/statm): node
/// memory per idle authenticated session and per unauthenticated stream, whether sessions
/// opened and closed (some cut in the middle of a frame) leave memory behind, the largest RSS
/// under the attacks of items 2–9 (each phase on a fresh node), and a large history and SYNC
/// backlog delivered completely to a client reading at 256 KB/s. Each phase prints its lines;
/// the last line is one summary of every phase run (`--phases` picks some).
struct ResourcesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resources",
        abstract:
            "Node RSS per idle session and per unauthenticated stream, a leak check, peaks under attack, paced large answers."
    )

    /// Every phase, in the order they run.
    static let allPhases = [
        "unauthenticated", "idle", "leak", "control", "sink", "slots", "windows", "nonces", "idle-connections",
        "stalled-uploads",
        "history", "backlog",
    ]

    @Option(help: "The lamina-node binary (default: next to this executable).") var nodeBinary: String?
    @Option(help: "Phases to run, comma-separated (default: all): \(Self.allPhases.joined(separator: ", ")).")
    var phases: String?
    @Option(help: "Idle authenticated sessions, each on its own connection.") var sessions = 2_000
    @Option(help: "Unauthenticated streams (HELLO only), 100 per connection.") var unauthenticated = 1_000
    @Option(help: "Sessions opened, authenticated and closed for the leak check.") var leakSessions = 10_000
    @Option(help: "Of those, streams reset in the middle of a frame.") var midFrame = 500
    @Option(help: "Messages of 33 KB sent to a member that reads (control) or reads nothing (sink).")
    var floodMessages = 1_200
    @Option(help: "Connections of 100 streams sending HELLO and PING (slots; the node admits 1,000 unauthenticated).")
    var slotConnections = 20
    @Option(help: "Unauthenticated streams, 8 per connection (windows, nonces).") var floodStreams = 800
    @Option(help: "Bytes of PINGs each of those sends at once (windows).") var windowBytes = 64 * 1_024
    @Option(help: "TLS connections that open no stream (idle-connections).") var idleConnections = 1_000
    @Option(help: "Header-only 1 GiB uploads left stalled, 8 per user (stalled-uploads).") var stalledUploads = 400
    @Option(help: "MB of history in one conversation, fetched by a 256 KB/s reader (history).") var historyMB = 60
    @Option(help: "Rounds of concurrent fast readers of that history afterwards, comma-separated (history).")
    var historyReaders = "8,32"
    @Option(help: "Streams on one connection that ask for that history and read nothing (history).")
    var unreadStreams = 100
    @Option(help: "MB of SYNC backlog to a 256 KB/s reader (backlog).") var backlogMB = 6
    @Option(help: "The slow reader's rate, bytes a second.") var readRate = 256 * 1_024
    @Option(help: "Seconds to let the node settle before each RSS reading.") var settleSeconds = 2.0

    func run() async throws {
        BenchSupport.raiseFileLimit()
        let binary = try NodeProcess.binary(nodeBinary)
        let selected =
            phases.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? Self.allPhases
        for name in selected where !Self.allPhases.contains(name) { throw ValidationError("unknown phase \(name)") }
        // Everything comes from 127.0.0.1: lift the per-address and per-connection limits on
        // unauthenticated sessions (the node-wide one stays 1,000), and the per-address limit on
        // connections above the most a phase holds (`idle`: a connection per session), with room
        // for the warm-up session and the healthy logins.
        let connections = max(sessions, idleConnections) + 1_000
        let config = try BenchSupport.temporaryDirectory() + "/resources-\(UUID().uuidString.prefix(8)).json"
        try Data(
            #"{"resources": {"maxUnauthenticatedPerAddress": 1000, "maxUnauthenticatedPerConnection": 100, "maxConnectionsPerAddress": \#(connections)}}"#
                .utf8
        )
        .write(to: URL(fileURLWithPath: config))
        print("lamina-bench resources: each phase on a fresh node process; load \(BenchSupport.loadAverage())")
        let summary = Summary()
        for name in Self.allPhases where selected.contains(name) {
            try await phase(name, binary, config) { p in try await runPhase(name, p, summary) }
        }
        print("resources summary: " + summary.line())
    }

    private func runPhase(_ name: String, _ p: Phase, _ summary: Summary) async throws {
        switch name {
        case "unauthenticated": try await unauthenticatedStreams(p, summary)
        case "idle": try await idleSessions(p, summary)
        case "leak": try await leakCheck(p, summary)
        case "control": try await memberFlood(p, reading: true, summary)
        case "sink": try await memberFlood(p, reading: false, summary)
        case "slots": try await slotFlood(p, summary)
        case "windows": try await windowFlood(p, summary)
        case "nonces": try await nonceFlood(p, summary)
        case "idle-connections": try await idleConnectionFlood(p, summary)
        case "stalled-uploads": try await stalledUploadFlood(p, summary)
        case "history": try await pacedHistory(p, summary)
        case "backlog": try await pacedBacklog(p, summary)
        default: break
        }
    }

    /// A node of its own for one measurement, warmed by one session.
    private func phase(_ label: String, _ binary: String, _ config: String, _ body: (Phase) async throws -> Void)
        async throws
    {
        let node = try await NodeProcess.start(
            binary: binary, label: "resources-\(label)", extraArguments: ["--config", config])
        let restarter = Restarter(node: node, binary: binary, arguments: ["--config", config], settle: settleSeconds)
        defer { restarter.stop() }
        let phase = Phase(node: node, settle: settleSeconds, restarter: restarter)
        let warm = try await BenchSyncClient.connect(url: node.url, caFile: node.caFile, group: phase.group)
        try await warm.login(user: "warm", device: UUID(), dev: node.dev, cursor: 0)
        try await phase.settle()
        try await body(phase)
        await warm.close()
    }

    /// What a measurement needs of its node.
    struct Phase: Sendable {
        let pid: Int32
        let url: String
        let caFile: String
        let dev: DevIdentityProvider
        let settleSeconds: Double
        let group = MultiThreadedEventLoopGroup.singleton
        let restarter: Restarter
        init(node: NodeProcess, settle: Double, restarter: Restarter) {
            (pid, url, caFile, dev) = (node.pid, node.url, node.caFile, node.dev)
            self.settleSeconds = settle
            self.restarter = restarter
        }
        func rss() -> Int { BenchSupport.residentBytes(pid: pid) }
        /// Of ``rss()``, the pages backed by files (the store's memory map).
        func rssFile() -> Int { BenchSupport.residentFileBytes(pid: pid) }
        /// The phase's node stopped and started again on its data (a fresh process, same port).
        func restarted() async throws -> Phase { try await restarter.restart() }
        func settle() async throws { try await Task.sleep(for: .milliseconds(Int64(settleSeconds * 1_000))) }
        func tls() throws -> TLSContext { try TLSContext(.client(trust: .caFile(caFile))) }
    }

    /// The node of one phase, which a measurement may start again on the same data directory.
    final class Restarter: @unchecked Sendable {
        private let lock = NIOLock()
        private var node: NodeProcess
        private let binary: String
        private let arguments: [String]
        private let settle: Double

        init(node: NodeProcess, binary: String, arguments: [String], settle: Double) {
            (self.node, self.binary, self.arguments, self.settle) = (node, binary, arguments, settle)
        }

        func restart() async throws -> Phase {
            let old = lock.withLock { node }
            old.stop(keepData: true)
            let fresh = try await NodeProcess.start(
                binary: binary, data: old.dataDirectory, port: old.port, extraArguments: arguments)
            lock.withLock { node = fresh }
            return Phase(node: fresh, settle: settle, restarter: self)
        }

        func stop() { lock.withLock { node }.stop() }
    }

    static func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
    static func kib(_ bytes: Int, per count: Int) -> String {
        String(format: "%.1f KiB", Double(bytes) / Double(max(1, count)) / 1_024)
    }

    /// Unauthenticated streams (HELLO only, 100 per connection), then each holding a 16 KiB
    /// frame cut at 12 KiB (the largest frame before authentication).
    private func unauthenticatedStreams(_ p: Phase, _ summary: Summary) async throws {
        let start = p.rss()
        var connections: [TransportConnection] = []
        var streams: [BenchSyncClient] = []
        let tls = try p.tls()
        while streams.count < unauthenticated {
            let connection = try await TransportConnection.connect(to: p.url, tls: tls, group: p.group)
            connections.append(connection)
            for _ in 0..<min(100, unauthenticated - streams.count) {
                let stream = try await BenchSyncClient.open(on: connection)
                try await stream.hello()
                streams.append(stream)
            }
        }
        try await p.settle()
        let held = p.rss()
        print(
            "unauthenticated streams: \(streams.count) on \(connections.count) connections, RSS \(Self.mib(start)) -> \(Self.mib(held)): \(Self.kib(held - start, per: streams.count)) each"
        )
        summary.add("unauthenticated stream \(Self.kib(held - start, per: streams.count))")
        for stream in streams {
            var partial = ByteBuffer()
            partial.writeBytes([0, 0, 0x40, 0, 0x02, 0x01, 0, 0])  // a 16,384-byte SEND_MESSAGE header
            partial.writeBytes([UInt8](repeating: 0, count: 12 * 1_024))
            stream.stream.write(partial, promise: nil)
        }
        try await p.settle()
        let partial = p.rss()
        print(
            "  each holding a 16 KiB frame cut at 12 KiB: RSS \(Self.mib(partial)): \(Self.kib(partial - start, per: streams.count)) each"
        )
        summary.peak("partial frames", partial)
        for connection in connections { try? await connection.close() }
        try await p.settle()
        print("  after closing them: RSS \(Self.mib(p.rss()))")
    }

    /// Idle authenticated sessions, each on its own connection (a device).
    private func idleSessions(_ p: Phase, _ summary: Summary) async throws {
        let start = p.rss()
        var idle: [BenchSyncClient] = []
        for batch in stride(from: 0, to: sessions, by: 50) {
            idle += try await withThrowingTaskGroup(of: BenchSyncClient.self) { tasks in
                for i in batch..<min(batch + 50, sessions) {
                    tasks.addTask {
                        let client = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
                        try await client.login(user: UserID("idle\(i % 100)"), device: UUID(), dev: p.dev, cursor: 0)
                        return client
                    }
                }
                return try await tasks.reduce(into: []) { $0.append($1) }
            }
        }
        try await p.settle()
        let held = p.rss()
        print(
            "idle authenticated sessions: \(sessions), RSS \(Self.mib(start)) -> \(Self.mib(held)): \(Self.kib(held - start, per: sessions)) each (its TLS connection included)"
        )
        summary.add("idle session \(Self.kib(held - start, per: sessions))")
        for client in idle { await client.close() }
        try await p.settle()
        print("  after closing them: RSS \(Self.mib(p.rss()))")
    }

    /// Sessions opened, authenticated and closed; some cut in the middle of a 512 KiB frame.
    private func leakCheck(_ p: Phase, _ summary: Summary) async throws {
        // A first round of the same size lets the allocator reach its working set.
        for round in 0..<2 {
            let before = p.rss()
            var cut = 0
            for batch in stride(from: 0, to: leakSessions, by: 50) {
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    for i in batch..<min(batch + 50, leakSessions) {
                        let midFrame = i % max(1, leakSessions / max(1, self.midFrame)) == 0 && cut < self.midFrame
                        if midFrame { cut += 1 }
                        tasks.addTask {
                            let client = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
                            try await client.login(user: UserID("leak\(i % 100)"), device: UUID(), dev: p.dev)
                            if midFrame {
                                var partial = ByteBuffer()
                                partial.writeBytes([0, 0x08, 0, 0, 0x02, 0x01, 0, 0])  // a 512 KiB SEND_MESSAGE header
                                partial.writeBytes([UInt8](repeating: 0, count: 256 * 1_024))
                                try await client.stream.write(partial).get()
                            }
                            await client.close()
                        }
                    }
                    try await tasks.waitForAll()
                }
            }
            try await p.settle()
            let after = p.rss()
            print(
                "leak check round \(round + 1): \(leakSessions) sessions opened and closed (\(cut) cut in the middle of a 512 KiB frame): RSS \(Self.mib(before)) -> \(Self.mib(after)) (\(String(format: "%+.0f", Double(after - before) / Double(leakSessions))) bytes per session)"
            )
            if round == 1 {
                summary.add("leak \(String(format: "%+.0f", Double(after - before) / Double(leakSessions))) B/session")
            }
        }
    }

    /// Messages of 33 KB (1,200: 40 MB) to a conversation of two; the other member reads them,
    /// or its connection reads nothing (huge HTTP/2 windows, so only its socket holds the node back).
    private func memberFlood(_ p: Phase, reading: Bool, _ summary: Summary) async throws {
        var settings = HTTP2Settings()
        settings.initialStreamWindow = Int32.max
        settings.connectionWindow = Int32.max
        let memberConnection = try await TransportConnection.connect(
            to: p.url, tls: try p.tls(), settings: settings, group: p.group)
        let member = try await BenchSyncClient.open(on: memberConnection)
        try await member.login(user: "member", device: UUID(), dev: p.dev, cursor: 0)
        let sender = try await BenchSyncClient.connect(url: p.url, caFile: p.caFile, group: p.group)
        try await sender.login(user: "sender", device: UUID(), dev: p.dev, cursor: 0)
        let conversation = ConversationID.random()
        _ = try await sender.request(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["sender", "member"],
                    options: ConversationOptions(isDistinct: false))),
            id: conversation.uuid
        ).get()
        if !reading { try await memberConnection.setReading(false) }
        let start = p.rss()
        var peak = start
        let parts = try (0..<16).map { _ in try MessagePart(text: String(repeating: "s", count: 2_048)) }
        for i in 0..<floodMessages {
            let id = MessageID.random()
            _ = try await sender.request(
                .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts)), id: id.uuid
            ).get()
            if i % 50 == 0 { peak = max(peak, p.rss()) }
        }
        try await p.settle()
        peak = max(peak, p.rss())
        print(
            "\(String(format: "%.1f", Double(floodMessages) * 0.033)) MB sent to a member that \(reading ? "reads everything" : "reads nothing"): RSS \(Self.mib(start)) -> peak \(Self.mib(peak)), \(Self.mib(p.rss())) after"
        )
        if reading {
            summary.add(
                "member reading \(String(format: "%.1f", Double(floodMessages) * 0.033)) MB: peak \(Self.mib(peak))")
        } else {
            summary.peak("a member reading nothing", peak)
        }
        await sender.close()
        try? await memberConnection.close()
    }
}
