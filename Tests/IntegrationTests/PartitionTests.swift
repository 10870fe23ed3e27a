import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue #31: two real node processes in a network namespace of the test's own, peered over
/// mutual TLS; their peer ports' packets are dropped (iptables DROP: no reset reaches either
/// node) for 5 s and for 60 s while users send on both sides. Each node notices the dead link
/// by its unanswered HTTP/2 PING, logs the loss, redials with backoff, logs the link's return,
/// and the two converge within 5 s of the heal whatever the partition's length.
///
/// Needs root, `ip` and `iptables` (CI runs as root; `.ci/deps` installs them): a machine that
/// cannot make the namespace fails the test, it does not skip it. The two lengths run at once.
@Suite struct PartitionTests {
    /// The most the nodes may take to converge once the partition heals.
    static let convergenceBound = Duration.seconds(5)
    /// What PeerSettings' defaults promise for noticing a dead link (1 s quiet + 2 s deadline),
    /// with slack for a loaded machine.
    static let detectionBound = Duration.seconds(8)

    @Test(arguments: [5, 60])
    func nodesNoticeADroppedLinkRedialAndConvergeSoonAfterTheHeal(partitionSeconds: Int) async throws {
        let namespace = try await NetworkNamespace.create(label: "\(partitionSeconds)s")
        var nodes: [NodeProcess] = []
        do {
            try await Self.partition(for: .seconds(partitionSeconds), in: namespace) { nodes.append($0) }
        } catch {
            await Self.tearDown(nodes, namespace)
            throw error
        }
        await Self.tearDown(nodes, namespace)
    }

    static func tearDown(_ nodes: [NodeProcess], _ namespace: NetworkNamespace) async {
        for node in nodes where node.isRunning { _ = try? await node.stop() }
        await namespace.delete()
    }

    /// One run: start, check the link, cut, send on both sides, heal, measure.
    static func partition(for length: Duration, in namespace: NetworkNamespace, started: (NodeProcess) -> Void)
        async throws
    {
        let folder = Fixtures.temporaryDirectory("partition-\(length.components.seconds)s")
        let certificates = folder.appendingPathComponent("certificates")
        let ca = try DevelopmentCluster.certificateAuthority(in: certificates).certificate
        let devIdentity = folder.appendingPathComponent(LocalNode.Files.devIdentity)
        _ = try DevIdentityProvider.loadOrCreate(in: devIdentity)
        let peerPorts = [try ExecutableTests.freePort(), try ExecutableTests.freePort()]
        var nodes: [NodeProcess] = []
        for index in 0..<2 {
            let files = try DevelopmentCluster.nodeCertificate(for: NodeID(UInt64(index + 1)), in: certificates)
            let directory = folder.appendingPathComponent("node-\(index + 1)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let node = try await NodeProcess.start(
                in: directory,
                arguments: [
                    "--node-id", "\(index + 1)", "--peer-listen", "127.0.0.1:\(peerPorts[index])", "--peer",
                    "https://127.0.0.1:\(peerPorts[1 - index])",
                    "--peer-ca", ca, "--peer-certificate", files.certificate, "--peer-key", files.key,
                    "--certificate", files.certificate, "--key", files.key, "--dev-identity", devIdentity.path,
                ],
                namespace: namespace)
            started(node)
            nodes.append(node)
        }
        let label = "\(length.components.seconds) s partition"

        // Linked, and a message sent before the cut reaches both.
        try await send(on: nodes[0], as: "alice", to: "bob", "before the cut", namespace: namespace, folder: folder)
        try await waitForConvergence(
            of: nodes, in: namespace, within: .seconds(60), what: "\(label): the first convergence")

        try await namespace.drop(ports: peerPorts)
        let cut = ContinuousClock.now
        // Each node notices, logs the loss and takes the link off /metrics.
        var detected: [Duration] = []
        for (index, node) in nodes.enumerated() {
            try await waitUntil(
                "\(label): node \(index + 1) logs the loss; its log: \(node.logged.suffix(3_000))",
                within: detectionBound + .seconds(2)
            ) {
                node.logged.contains("peer link to \(2 - index) lost")
            }
            detected.append(ContinuousClock.now - cut)
        }
        let losses = nodes.map {
            $0.logged.components(separatedBy: "\n").first { $0.contains("peer link to") && $0.contains("lost") } ?? ""
        }
        #expect(losses.contains { $0.contains("no PING ACK in 2 s") }, "\(losses)")
        #expect(detected.allSatisfy { $0 <= detectionBound }, "\(label): detected after \(detected)")
        for node in nodes { #expect(try await metric("lamina_peer_links", of: node, in: namespace) == "0.0") }

        // Both sides keep taking messages.
        for round in 1...2 {
            try await send(
                on: nodes[0], as: "alice", to: "bob", "alice during the cut \(round)", namespace: namespace,
                folder: folder)
            try await send(
                on: nodes[1], as: "bob", to: "alice", "bob during the cut \(round)", namespace: namespace,
                folder: folder)
        }
        let digests = try await nodes.asyncMap { try await replication(of: $0, in: namespace).digest }
        #expect(digests[0] != digests[1], "\(label): the nodes converged through a partition")
        // The dialers keep trying while the packets are dropped.
        try await waitUntil("\(label): a failed redial", within: .seconds(30)) {
            nodes.allSatisfy { $0.logged.contains("peer dial failed") }
        }
        let remaining = cut + length - ContinuousClock.now
        if remaining > .zero { try await Task.sleep(for: remaining) }  // the partition's length is what is tested

        try await namespace.heal(ports: peerPorts)
        let healed = ContinuousClock.now
        try await waitForConvergence(
            of: nodes, in: namespace, within: .seconds(60), what: "\(label): convergence after the heal")
        let converged = ContinuousClock.now - healed
        #expect(converged <= convergenceBound, "\(label): converged \(converged) after the heal")
        for (index, node) in nodes.enumerated() {
            try await waitUntil("\(label): node \(index + 1) logs the link's return", within: .seconds(10)) {
                node.logged.contains("peer link to \(2 - index) restored after")
            }
            // The side that dialed the lost link redials it (the other side's own dialer may
            // never have had a link: the one it accepted was kept, SPEC §6.5).
            if node.logged.contains("peer link to \(2 - index) up (dialed)") {
                #expect(node.logged.contains("redialing peer https://127.0.0.1:\(peerPorts[1 - index])"))
            }
            #expect(try await metric("lamina_peer_links", of: node, in: namespace) == "1.0")
        }
        #expect(nodes.contains { $0.logged.contains("redialing peer") }, "\(label): no node redialed")
        let lines = nodes.flatMap { node in
            node.logged.components(separatedBy: "\n").filter { $0.contains("peer link to") || $0.contains("redialing") }
        }
        print(
            """
            partition \(label): loss logged after \(detected.map { "\($0)" }.joined(separator: " and ")); converged \(converged) after the heal
            \(lines.joined(separator: "\n"))
            """)
    }

    /// `lamina send` run inside the namespace against `node`: returns once the node has the message.
    static func send(
        on node: NodeProcess, as user: String, to other: String, _ text: String, namespace: NetworkNamespace,
        folder: URL
    ) async throws {
        let ca = folder.appendingPathComponent("certificates/\(DevelopmentCluster.caFileName)").path
        let result = try await namespace.run(
            try BuiltProduct.url("lamina").path,
            [
                "send", "--user", user, "--to", other, "--node", "https://127.0.0.1:\(node.syncPort)", "--ca", ca,
                "--node-data", folder.path, "--data", folder.appendingPathComponent("client-\(user)").path, text,
            ])
        guard result.status == 0 else {
            throw SyncTestTimeout(waitingFor: "lamina send \(text): status \(result.status): \(result.stderr)")
        }
    }

    /// GET `path` on the node's admin port, from inside the namespace.
    static func admin(_ path: String, of node: NodeProcess, in namespace: NetworkNamespace) async throws -> String {
        let result = try await namespace.run(
            "/usr/bin/curl", ["-sS", "-m", "2", "http://127.0.0.1:\(node.adminPort)\(path)"])
        guard result.status == 0 else { throw SyncTestTimeout(waitingFor: "curl \(path): \(result.stderr)") }
        return result.stdout
    }

    static func replication(of node: NodeProcess, in namespace: NetworkNamespace) async throws
        -> DevClusterTests.Replication
    {
        try DevClusterTests.Replication(try await admin("/replication", of: node, in: namespace))
    }

    /// A metric's value on the node's /metrics (nil when absent).
    static func metric(_ name: String, of node: NodeProcess, in namespace: NetworkNamespace) async throws -> String? {
        let text = try await admin("/metrics", of: node, in: namespace)
        return text.components(separatedBy: "\n").first { $0.hasPrefix(name + " ") }.map {
            String($0.dropFirst(name.count + 1))
        }
    }

    /// Polls until both nodes' digests are equal and each has a link to the other.
    static func waitForConvergence(
        of nodes: [NodeProcess], in namespace: NetworkNamespace, within timeout: Duration, what: String
    ) async throws {
        var last: [DevClusterTests.Replication] = []
        try await waitUntil(what, within: timeout, describe: { "\(last.map { ($0.node, $0.peers, $0.digest) })" }) {
            guard let states = try? await nodes.asyncMap({ try await replication(of: $0, in: namespace) }) else {
                return false
            }
            last = states
            return states[0].digest == states[1].digest && states[0].peers == ["2"] && states[1].peers == ["1"]
        }
    }

    static func waitUntil(
        _ what: String, within timeout: Duration, describe: () -> String = { "" }, _ done: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await !done() {
            guard ContinuousClock.now < deadline else { throw SyncTestTimeout(waitingFor: "\(what) \(describe())") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
