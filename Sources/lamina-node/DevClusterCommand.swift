import ArgumentParser
import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode

#if canImport(Glibc)
    import Glibc
#endif

/// `lamina-node dev-cluster`: a local cluster in one command, for newcomers and tests.
///
/// Each node is a `lamina-node serve` child process, not a server inside this process: the
/// metrics and logging systems are process-wide (bootstrapped once), so nodes sharing a
/// process would share one `/metrics`; as processes, each node is exactly what a real
/// deployment runs, and one can be stopped or killed alone to watch the others catch it up.
struct DevCluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-cluster",
        abstract:
            "Start a local cluster of N peered nodes (dev CA and certificates made on first run); Ctrl-C stops all.",
        discussion: """
            Node i (1...N) has node id i, data in <directory>/node-<i>, and listens on 127.0.0.1: sync on \
            base + 10·(i−1), admin on the next port, peers on the one after (default base \(ClusterLayout.defaultBasePort): \
            node-1 7450/7451/7452, node-2 7460/7461/7462, ...). Every node dials every other; the cluster CA and the \
            nodes' peer certificates are in <directory>/certificates (made when missing, kept between runs); each node \
            serves clients with its peer certificate too (trust <directory>/certificates/cluster-ca.pem), and all share one \
            dev identity key, <directory>/dev-identity, so a client moves between nodes with the same --node-data <directory>. \
            Each node's full serve command is printed: stop one (kill <pid>) and run it again alone. \
            The cluster stops on Ctrl-C or SIGTERM, and when the process that started it exits.
            """)

    @Option(help: "Nodes, \(ClusterLayout.nodeCounts.lowerBound)...\(ClusterLayout.nodeCounts.upperBound).")
    var nodes = 3
    @Option(help: "Node 1's sync port; node i's is base + 10·(i−1) (admin +1, peers +2).")
    var basePort = ClusterLayout.defaultBasePort
    @Option(help: "The cluster's folder: data directories and certificates.")
    var directory = "./.lamina-cluster"
    @Option(help: "The cluster's name (serve's default too).")
    var cluster = PeerSettings().cluster
    @Option(help: "The nodes' log level (their log lines are prefixed [node-<i>]).")
    var logLevel = "notice"
    @Option(help: "Seconds to wait for every node to serve.")
    var startTimeout = 60

    func validate() throws {
        guard ClusterLayout.nodeCounts.contains(nodes) else {
            throw ValidationError(
                "--nodes must be \(ClusterLayout.nodeCounts.lowerBound)...\(ClusterLayout.nodeCounts.upperBound), not \(nodes)"
            )
        }
        let ports = ClusterLayout.basePorts(nodes: nodes)
        guard ports.contains(basePort) else {
            throw ValidationError("--base-port must be \(ports.lowerBound)...\(ports.upperBound) for \(nodes) nodes")
        }
        guard (1...600).contains(startTimeout) else { throw ValidationError("--start-timeout is 1...600 seconds") }
    }

    func run() async throws {
        let layout = ClusterLayout(nodes: nodes, basePort: basePort, directory: directory)
        let certificates = URL(fileURLWithPath: layout.certificates)
        _ = try DevelopmentCluster.certificateAuthority(in: certificates)
        // Made before the nodes start, so that they do not race to create it.
        _ = try DevIdentityProvider.loadOrCreate(in: URL(fileURLWithPath: layout.devIdentity))
        guard let binary = Bundle.main.executablePath else {
            throw ValidationError("cannot find this lamina-node's executable")
        }

        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        // A parent gone takes its end of our standard output and error with it: writing there
        // must fail (EPIPE) rather than kill this supervisor before it stops its nodes.
        signal(SIGPIPE, SIG_IGN)
        let (events, continuation) = AsyncStream.makeStream(of: ClusterEvent.self)
        let signals = SignalWaiter(signals: [SIGTERM, SIGINT])
        // One signal stops the cluster (SignalWaiter's stream has one consumer: asking it again
        // after the first signal answered at once, and a loop here spun forever).
        Task { continuation.yield(.signal(await signals.next())) }
        // So does the death of the process that started it (a terminal closed, a test killed):
        // an orphaned supervisor once kept running, and spinning, with its nodes.
        ParentWatch.start { continuation.yield(.parentExited) }

        var members: [ClusterMember] = []
        var commands: [Int: String] = [:]
        for node in layout.all {
            let files = try DevelopmentCluster.nodeCertificate(for: node.id, in: certificates)
            // Paths under the cluster's folder as the user wrote it, so the printed command reads as the others.
            let arguments = layout.serveArguments(
                node.index, cluster: cluster, certificate: layout.certificateFile(files.certificate),
                key: layout.certificateFile(files.key),
                ca: layout.caFile, logLevel: logLevel)
            commands[node.index] = ClusterLayout.shellCommand(["swift", "run", "lamina-node"] + arguments)
            do {
                members.append(
                    try ClusterMember.launch(node, binary: binary, arguments: arguments, events: continuation))
            } catch {
                await Self.stop(members, events: events)
                throw error
            }
        }
        let timeout = Task { [startTimeout] in
            try await Task.sleep(for: .seconds(startTimeout))
            continuation.yield(.startTimeout)
        }
        print("Starting \(nodes) nodes of cluster '\(cluster)' in \(directory) ...")
        fflush(nil)

        var serving = Set<Int>()
        var exited: [Int: Int32] = [:]
        var failure: String?
        loop: for await event in events {
            switch event {
            case .serving(let index):
                serving.insert(index)
                print(Self.describe(members[index - 1], layout: layout, command: commands[index] ?? ""))
                if serving.count == nodes {
                    timeout.cancel()
                    print(
                        """
                        The cluster is up: \(nodes) nodes, each dialing the others (links form within seconds; \
                        GET /replication on an admin port shows them and the digest, equal on every node once converged).
                        Stop one node alone with kill <pid> (or kill -9): the others keep running; run its serve: command and it catches up.
                        Stop all: Ctrl-C or SIGTERM.
                        """)
                }
                fflush(nil)
            case .exited(let index, let status):
                // Before the cluster is up, a node that exits is a failed start; after, the others keep running.
                guard serving.count == nodes else {
                    failure = "node-\(index) exited with status \(status) before the cluster was up"
                    break loop
                }
                exited[index] = status
                print("node-\(index) exited with status \(status); the other nodes keep running (Ctrl-C stops them)")
                fflush(nil)
                if exited.count == nodes { break loop }
            case .signal:
                break loop
            case .parentExited:
                failure = "the process that started the cluster is gone"
                break loop
            case .startTimeout:
                guard serving.count == nodes else {
                    failure = "not every node served within \(startTimeout) s"
                    break loop
                }
            }
        }
        timeout.cancel()
        print(failure.map { "\($0); stopping the cluster" } ?? "Stopping the cluster")
        fflush(nil)
        let statuses = await Self.stop(members.filter { exited[$0.node.index] == nil }, events: events)
        for (index, status) in statuses.sorted(by: { $0.key < $1.key }) where status != 0 {
            print("node-\(index) exited with status \(status)")
        }
        print("Stopped.")
        fflush(nil)
        if failure != nil { throw ExitCode(1) }
    }

    /// The block printed when a node serves: its addresses, the command that runs it alone,
    /// and how to chat through it (each node's hint names other users).
    static func describe(_ member: ClusterMember, layout: ClusterLayout, command: String) -> String {
        let node = member.node
        let (user, other) = layout.chatUsers(node.index)
        return """
            \(node.name) (node id \(String(node.id.rawValue, radix: 16)), pid \(member.pid)) is serving.
              sync:   \(node.syncURL)\(NodeServer.syncPath)
              admin:  \(node.adminURL)/replication  \(node.adminURL)/metrics  \(node.adminURL)/health
              peers:  \(node.peerURL)\(PeerService.path)
              data:   \(node.dataDirectory)
              serve:  \(command)
              chat:   swift run lamina chat --user \(user) --with \(other) --node \(node.syncURL) --node-data \(layout.directory) \
            --ca \(layout.caFile) --data \(layout.directory)/client-\(node.index)
            """
    }

    /// SIGTERM to every member still running, then their exits (SIGKILL after 15 s); the
    /// status of each that exited now or before.
    @discardableResult
    static func stop(_ members: [ClusterMember], events: AsyncStream<ClusterEvent>) async -> [Int: Int32] {
        var statuses: [Int: Int32] = [:]
        for member in members where member.process.isRunning { member.terminate() }
        for member in members where !member.process.isRunning {
            statuses[member.node.index] = member.process.terminationStatus
        }
        let killer = Task {
            try await Task.sleep(for: .seconds(15))
            for member in members where member.process.isRunning { member.kill9() }
        }
        defer { killer.cancel() }
        guard statuses.count < members.count else { return statuses }
        for await event in events {
            if case .exited(let index, let status) = event { statuses[index] = status }
            if statuses.count == members.count { break }
        }
        return statuses
    }
}
