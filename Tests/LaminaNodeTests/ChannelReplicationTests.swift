import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// Channels across peers without a network (SPEC §6.8, §6.5 kinds 16 to 19): engines exchange
/// their replication logs by hand. Joins, leaves, sends and a deletion made concurrently on
/// two nodes, applied on third nodes in random interleavings (each origin's operations in
/// order) and again (replays), end in the same channel state everywhere, the membership being
/// what LaminaMerge's `ChannelMembership` makes of the operations.
@Suite struct ChannelReplicationTests {
    static let users: [UserID] = ["u0", "u1", "u2", "u3"]

    @Test(arguments: [3, 17, 4242, 90_001, 7, 123] as [UInt64])
    func concurrentChannelOperationsConvergeInAnyOrder(seed: UInt64) async throws {
        let a = try ReplicationTests.node(1)
        let b = try ReplicationTests.node(2)
        defer {
            Task {
                await a.close()
                await b.close()
            }
        }
        var onA: [Client] = []
        var onB: [Client] = []
        for user in Self.users {
            onA.append(try await a.connect(user))
            onB.append(try await b.connect(user))
        }
        let channel = ChannelID.random()
        let created = try await onA[0].command(
            .createChannel(CreateChannel(channelID: channel, name: try ChannelName("room \(seed)"))))
        guard case .ack = created.reply else { throw EngineTestError(description: "\(created.reply)") }
        try await ReplicationTests.pull(b, from: a)
        let base = try await a.engine.versionVector()

        var random = DifferentialRandom(seed: seed)
        let deleteAt = seed % 2 == 0 ? 12 : -1
        for step in 0..<24 {
            let onNodeA = random.next() % 2 == 0
            let client = (onNodeA ? onA : onB)[Int(random.next() % UInt64(Self.users.count))]
            let request = UUID()
            let frame: Frame
            if step == deleteAt {
                frame = .deleteChannel(ChannelRequest(requestID: request, channelID: channel))
                _ = try await onA[0].command(frame)
                continue
            }
            switch random.next() % 3 {
            case 0: frame = .joinChannel(ChannelRequest(requestID: request, channelID: channel))
            case 1: frame = .leaveChannel(ChannelRequest(requestID: request, channelID: channel))
            default:
                frame = .sendChannelMessage(
                    SendChannelMessage(messageID: .random(), channelID: channel, parts: [textPart("s\(step)")]))
            }
            _ = try await client.command(frame)
        }
        let fromA = try await a.engine.operations(missingFrom: base, limit: 256)
        let fromB = try await b.engine.operations(missingFrom: base, limit: 256).filter { $0.origin == NodeID(2) }
        let prefix = try await a.engine.operations(missingFrom: VersionVector(), limit: 256).filter {
            base.counters[$0.origin, default: 0] >= $0.counter
        }
        #expect(!fromA.isEmpty || !fromB.isEmpty)

        // Two third nodes, each fed the concurrent operations in its own interleaving, then
        // everything again (replayed operations change nothing).
        var digests: [String] = []
        var expected = ChannelMembership()
        for op in prefix + fromA + fromB {
            guard case .change(let event) = op.payload else { continue }
            switch event {
            case .channelMembershipChanged(let m):
                expected.apply(m.joined ? .joined(m.user, at: m.at) : .left(m.user, at: m.at))
            case .channelDeleted(let d): expected.apply(.deleted(at: d.at))
            default: break
            }
        }
        for round in 0..<2 {
            let c = try ReplicationTests.node(3 + UInt64(round))
            _ = try await c.engine.applyReplicated(prefix)
            var i = 0
            var j = 0
            while i < fromA.count || j < fromB.count {
                let takeA = j == fromB.count || (i < fromA.count && random.next() % 2 == 0)
                _ = try await c.engine.applyReplicated([takeA ? fromA[i] : fromB[j]])
                if takeA { i += 1 } else { j += 1 }
            }
            let before = try await c.engine.convergenceDigest().channels
            _ = try await c.engine.applyReplicated(prefix + fromB + fromA)
            #expect(try await c.engine.convergenceDigest().channels == before, "seed \(seed): a replay changed it")
            digests.append(before)
            let members = try await c.store.read { r in try r.channelMembers(of: channel) }
            #expect(Set(members) == expected.members, "seed \(seed): the store's members are the merge's")
            await c.close()
        }
        try await ReplicationTests.pull(a, from: b)
        try await ReplicationTests.pull(b, from: a)
        let dA = try await a.engine.convergenceDigest().channels
        let dB = try await b.engine.convergenceDigest().channels
        #expect(dA == dB, "seed \(seed)")
        #expect(digests == [dA, dA], "seed \(seed)")
        for node in [a, b] {
            let (members, log, record) = try await node.store.read { r in
                (
                    try r.channelMembers(of: channel), try r.channelLog(channel, after: 0, limit: 1_000),
                    try r.channel(channel)
                )
            }
            #expect(Set(members) == expected.members, "seed \(seed)")
            #expect(record?.isDeleted == expected.isDeleted, "seed \(seed)")
            #expect(record?.memberCount == expected.memberCount, "seed \(seed)")
            // Each node numbers its own log 1, 2, 3, ... without gaps.
            #expect(log.map(\.logSeq) == Array(stride(from: 1, through: UInt64(log.count), by: 1)), "seed \(seed)")
        }
    }
}
