import Foundation
import LaminaClient
import LaminaNode

/// Two peered nodes for partition tests: B dials A through a proxy the test cuts and heals;
/// alice has a device on each node and bob one on B, all connected.
struct PartitionableDevices {
    let a: TestNode
    let b: TestNode
    let proxy: TCPProxy
    let alice: LaminaClient
    let aliceOnB: LaminaClient
    let bob: LaminaClient

    var devices: [LaminaClient] { [alice, aliceOnB, bob] }

    /// Starts both nodes (data under `name`), the proxy and the three devices.
    static func start(_ name: String) async throws -> PartitionableDevices {
        let certificates = Fixtures.temporaryDirectory("\(name)-certs")
        let nodeA = PeerReplicationTests.nodeA
        let nodeB = PeerReplicationTests.nodeB
        let a = try await TestNode.start("\(name)-a") { c in
            c.nodeID = nodeA.rawValue
            c.adminPort = 0
            c.peers = try! DevelopmentCluster.settings(for: nodeA, port: 0, peers: [], in: certificates)
        }
        let proxy = try await TCPProxy.start(to: a.server.peers!.transport.port)
        let b = try await TestNode.start("\(name)-b") { c in
            c.nodeID = nodeB.rawValue
            c.peers = try! DevelopmentCluster.settings(
                for: nodeB, port: 0, peers: ["https://127.0.0.1:\(proxy.port)"], in: certificates)
            c.peers.reconnectMinimumMilliseconds = 20
            c.peers.reconnectMaximumMilliseconds = 200
        }
        let devices = PartitionableDevices(
            a: a, b: b, proxy: proxy, alice: try ClientHarness.device("alice", on: a),
            aliceOnB: try ClientHarness.device("alice", on: b), bob: try ClientHarness.device("bob", on: b))
        for (client, node) in [(devices.alice, a), (devices.aliceOnB, b), (devices.bob, b)] {
            try await ClientHarness.connect(client, on: node)
        }
        return devices
    }

    /// Closes the devices, then stops the nodes and the proxy.
    func stop() async throws {
        for client in devices { try await client.close() }
        await b.stop()
        await a.stop()
        await proxy.stop()
    }
}
