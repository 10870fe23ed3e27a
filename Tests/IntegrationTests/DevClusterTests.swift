import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaProcess
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built `lamina-node dev-cluster`: two child nodes peer with each other, replicate, show
/// it on their admin ports, and stop on SIGTERM.
@Suite struct DevClusterTests {
    @Test func twoNodesPeerConvergeAndStopOnSIGTERM() async throws {
        let directory = Fixtures.temporaryDirectory("dev-cluster")
        let base = try Self.freeBasePort(nodes: 2)
        let cluster = try DevClusterProcess(
            in: directory, arguments: ["dev-cluster", "--nodes", "2", "--base-port", "\(base)"])
        try await cluster.waitUntil("both nodes serve", timeout: .seconds(120)) {
            $0.components(separatedBy: "is serving").count - 1 == 2
        }
        let text = cluster.printed
        for (i, sync, user, other) in [(1, base, "alice", "bob"), (2, base + 10, "bob", "alice")] {
            #expect(text.contains("node-\(i) (node id \(i), pid"))
            #expect(text.contains("https://127.0.0.1:\(sync)/v1/sync"))
            #expect(text.contains("http://127.0.0.1:\(sync + 1)/replication"))
            // Each node's hint names its own user, and every node trusts one dev key and one CA.
            #expect(
                text.contains(
                    "--user \(user) --with \(other) --node https://127.0.0.1:\(sync) --node-data ./.lamina-cluster --ca ./.lamina-cluster/certificates/cluster-ca.pem"
                ))
            // The command that runs the node alone.
            #expect(
                text.contains(
                    "serve:  swift run lamina-node serve --data-dir ./.lamina-cluster/node-\(i) --listen 127.0.0.1:\(sync)"
                ))
        }
        #expect(text.contains("cluster 'lamina'"))

        // A conversation and a message on node 1 (a user of the cluster's shared dev identity
        // provider; TLS with the cluster CA).
        let clusterFolder = directory.appendingPathComponent(".lamina-cluster")
        let dev = try DevIdentityProvider.loadOrCreate(
            in: clusterFolder.appendingPathComponent(LocalNode.Files.devIdentity))
        // Connecting is retried briefly: a loaded run may refuse the first attempt.
        var connected: SyncTestClient?
        var lastError: (any Error)?
        let connectDeadline = ContinuousClock.now + .seconds(20)
        while connected == nil, ContinuousClock.now < connectDeadline {
            do {
                connected = try await SyncTestClient.connect(
                    url: "https://127.0.0.1:\(base)",
                    caFile: clusterFolder.appendingPathComponent("certificates/cluster-ca.pem").path)
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        guard let alice = connected else {
            Issue.record(
                "cannot connect to node 1 on \(base): \(String(describing: lastError)); cluster output: \(cluster.printed); node logs: \(cluster.logged.suffix(6_000))"
            )
            _ = try await cluster.stop()
            return
        }
        _ = try await alice.hello()
        _ = try await alice.authenticate(user: "alice", device: UUID(), dev: dev)
        let conversation = ConversationID.random()
        try await alice.command(
            .createConversation(
                CreateConversation(
                    conversationID: conversation, participants: ["alice", "bob"],
                    options: ConversationOptions(isDistinct: false))),
            id: conversation.uuid)
        let message = MessageID.random()
        try await alice.command(
            .sendMessage(
                SendMessage(messageID: message, conversationID: conversation, parts: [try MessagePart(text: "hi")])),
            id: message.uuid)
        await alice.close()

        // Each node's /replication shows a link to the other, the conversation, and one digest.
        let deadline = ContinuousClock.now + .seconds(60)
        var states: [Replication] = []
        while ContinuousClock.now < deadline {
            states = []
            // An admin port not answering yet (a loaded machine) is asked again.
            for port in [base + 1, base + 11] {
                if let body = try? await HTTPGet.fetch(port: port, path: "/replication").body {
                    states.append(try Replication(body))
                }
            }
            guard states.count == 2 else {
                try await Task.sleep(for: .milliseconds(100))
                continue
            }
            if states[0].peers == ["2"], states[1].peers == ["1"], states[0].digest == states[1].digest,
                states[1].conversations.count == 1
            {
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(states.map(\.node) == ["1", "2"])
        #expect(states.map(\.peers) == [["2"], ["1"]])
        #expect(
            states.map(\.conversations) == [
                [conversation.uuid.uuidString.lowercased()], [conversation.uuid.uuidString.lowercased()],
            ])
        #expect(states[0].digest == states[1].digest)

        let pids = try Self.pids(in: cluster.printed)
        #expect(pids.count == 2)
        #expect(try await cluster.stop() == 0)
        #expect(cluster.printed.contains("Stopped."))
        for pid in pids { #expect(kill(pid, 0) == -1 && errno == ESRCH, "node process \(pid) is gone") }
    }

    /// The supervisor exits, stopping its nodes, when the process that started it dies: here a
    /// shell that started it in the background is killed with SIGKILL.
    @Test func theSupervisorStopsItsNodesAndExitsWhenItsParentDies() async throws {
        let directory = Fixtures.temporaryDirectory("dev-cluster-orphan")
        let base = try Self.freeBasePort(nodes: 2)
        let binary = try BuiltProduct.url("lamina-node").path
        let shell = try DevClusterProcess(
            in: directory, executable: "/bin/sh",
            arguments: [
                "-c", "\"$0\" dev-cluster --nodes 2 --base-port \(base) & echo \"supervisor $!\"; wait", binary,
            ])
        try await shell.waitUntil("both nodes serve", timeout: .seconds(120)) {
            $0.components(separatedBy: "is serving").count - 1 == 2
        }
        let supervisor = try #require(
            Int32(shell.printed.components(separatedBy: "supervisor ").dropFirst().first?.prefix { $0.isNumber } ?? ""))
        let nodes = try Self.pids(in: shell.printed)
        #expect(nodes.count == 2)

        kill(shell.process.processIdentifier, SIGKILL)
        #expect(try await shell.exitStatus() == SIGKILL)
        // The orphaned supervisor (it kept the shell's output pipe) says why it stops, stops
        // its nodes and exits: the pipe then ends.
        try await shell.waitForEnd(timeout: .seconds(60))
        #expect(
            shell.printed.contains("the process that started the cluster is gone; stopping the cluster"),
            "\(shell.printed)")
        #expect(shell.printed.contains("Stopped."))
        for pid in nodes + [supervisor] { #expect(!Self.isAlive(pid), "process \(pid) is gone") }
    }

    /// Whether `pid` runs (a zombie not yet reaped by its new parent counts as gone).
    static func isAlive(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    @Test func refusesANodeCountOutsideItsRangeWithAReason() async throws {
        for count in ["1", "10"] {
            let cluster = try DevClusterProcess(
                in: Fixtures.temporaryDirectory("dev-cluster-bad"), arguments: ["dev-cluster", "--nodes", count])
            #expect(try await cluster.exitStatus() != 0)
            // What it wrote may still be in the pipe when the exit is seen: read to the end.
            let logged = try await cluster.loggedToTheEnd(timeout: .seconds(30))
            #expect(logged.contains("--nodes must be 2...9, not \(count)"), "\(logged)")
            #expect(!cluster.printed.contains("is serving"))
        }
    }

    /// What a node's GET /replication says.
    struct Replication {
        var node: String
        var digest: String
        var peers: Set<String>
        var conversations: Set<String>

        init(_ json: String) throws {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(json)")
            node = try #require(object["node"] as? String)
            digest = try #require(object["digest"] as? String)
            peers = Set(try #require(object["peers"] as? [String: Any]).keys)
            conversations = Set(try #require(object["conversations"] as? [String: Any]).keys)
        }
    }

    /// The node pids dev-cluster printed ("pid N)").
    static func pids(in text: String) throws -> [Int32] {
        text.components(separatedBy: ", pid ").dropFirst().compactMap { Int32($0.prefix { $0.isNumber }) }
    }

    /// A base port whose cluster ports (sync, admin, peers per node, 10 apart) are all free now.
    static func freeBasePort(nodes: Int) throws -> Int {
        for _ in 0..<50 {
            let base = try ExecutableTests.freePort()
            let ports = (0..<nodes).flatMap { n in (0..<3).map { base + 10 * n + $0 } }
            guard ports.last! <= 65535 else { continue }
            if ports.allSatisfy(Self.isFree) { return base }
        }
        throw SyncTestTimeout(waitingFor: "a free range of cluster ports")
    }

    static func isFree(_ port: Int) -> Bool {
        guard let channel = try? ServerBootstrap(group: Fixtures.group).bind(host: "127.0.0.1", port: port).wait()
        else { return false }
        try? channel.close().wait()
        return true
    }
}

/// `lamina-node` with `arguments` as a child process in `directory`, its standard output kept.
final class DevClusterProcess: Sendable {
    let process: ChildProcess
    private let output = NIOLockedValueBox("")
    private let errors = NIOLockedValueBox("")
    private let exited: PromiseBox<Int32>

    /// Whether its standard output ended.
    private let ended = NIOLockedValueBox(false)
    /// Whether its standard error ended.
    private let errorsEnded = NIOLockedValueBox(false)

    init(in directory: URL, executable: String? = nil, arguments: [String]) throws {
        let process = ChildProcess()
        process.executableURL = try executable.map { URL(fileURLWithPath: $0) } ?? BuiltProduct.url("lamina-node")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        self.process = process
        exited = PromiseBox(Fixtures.group.next().makePromise(of: Int32.self))
        try process.run()
        let exited = exited
        for (pipe, box, end) in [(stdout, output, ended), (stderr, errors, errorsEnded)] {
            Thread.detachNewThread {
                let reader = pipe.fileHandleForReading
                while true {
                    let chunk = PipeReading.next(reader)
                    if chunk.isEmpty { break }
                    box.withLockedValue { $0 += String(decoding: chunk, as: UTF8.self) }
                }
                end.withLockedValue { $0 = true }
            }
        }
        Thread.detachNewThread {
            process.waitUntilExit()
            exited.promise.succeed(process.terminationStatus)
        }
    }

    var printed: String { output.withLockedValue { $0 } }
    /// What it wrote on standard error (the nodes' log lines, prefixed; usage errors).
    var logged: String { errors.withLockedValue { $0 } }

    /// Polls the output until `done` holds (or throws after `timeout`, or when the process exits).
    func waitUntil(_ what: String, timeout: Duration, _ done: (String) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !done(printed) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                throw SyncTestTimeout(waitingFor: "\(what); printed: \(printed)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Returns once every writer of its standard output closed it (the process and whatever
    /// inherited the pipe), or throws after `timeout`.
    func waitForEnd(timeout: Duration) async throws {
        try await waitForEnd(of: ended, "the end of the output", timeout: timeout)
    }

    /// Everything it wrote on standard error, once every writer closed it (the exit can be
    /// seen before the last lines are read from the pipe); throws after `timeout`.
    func loggedToTheEnd(timeout: Duration) async throws -> String {
        try await waitForEnd(of: errorsEnded, "the end of standard error", timeout: timeout)
        return logged
    }

    private func waitForEnd(of end: NIOLockedValueBox<Bool>, _ what: String, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if end.withLockedValue({ $0 }) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw SyncTestTimeout(waitingFor: "\(what); printed: \(printed)")
    }

    /// SIGTERM and the exit status.
    func stop() async throws -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        return try await exitStatus()
    }

    /// The exit status, once it exits.
    func exitStatus() async throws -> Int32 { try await exited.promise.futureResult.get() }

    deinit { if process.isRunning { process.terminate() } }
}
