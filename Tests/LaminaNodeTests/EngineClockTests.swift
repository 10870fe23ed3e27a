import Foundation
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaNode

/// A restarted node's clock continues after everything it stored, whatever the wall clock says.
@Suite struct EngineClockTests {
    @Test func clockResumesAfterStoredPositionsEvenWhenTheWallClockIsBehind() async throws {
        try await withTemporaryStore { store, _ in
            // A position an hour ahead of now: as if the node ran with a clock later set back.
            let future = UInt64(Timestamp.now().millisecondsSince1970) + 3_600_000
            let ahead = hlc(future, 41, nodeA)
            let c = try conversation("alice", ["bob"])
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(
                    try textMessage("late", in: c.id, from: "alice", at: ahead), hlc: ahead, origin: nodeA)
            }
            #expect(try store.readNow { try $0.latestHLC(of: nodeA) } == ahead)
            #expect(try store.readNow { try $0.latestHLC(of: NodeID(0xB)) } == nil)

            let engine = try NodeEngine(
                store: store, configuration: NodeEngineConfiguration(nodeID: nodeA, identityProviders: []))
            let next = try engine.nextHLC()
            #expect(next > ahead)
            // A node with another id starts from its own (empty) history, i.e. the wall clock.
            let other = try NodeEngine(
                store: store, configuration: NodeEngineConfiguration(nodeID: NodeID(0xB), identityProviders: []))
            #expect(try other.nextHLC().physical < future)
            await engine.shutdown()
            await other.shutdown()
        }
    }
}
