import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Replies across two peered nodes (SPEC §6.5 Replies): a reply accepted on node B reaches a
/// device on node A with its root, both nodes index it under the root (a thread fetch on A
/// answers it) and report the same summary, and their replicated state converges.
@Suite struct ThreadsAcrossPeersTests {
    @Test func aReplyOnOneNodeIsAThreadReplyOnTheOther() async throws {
        let (a, b, _) = try await PeerReplicationTests.cluster("peer-threads")
        let alice = try ClientHarness.device("alice", on: a)
        let bob = try ClientHarness.device("bob", on: b)
        try await ClientHarness.connect(alice, on: a)
        try await ClientHarness.connect(bob, on: b)

        let conversation = try alice.newConversation(participants: ["bob"]).id
        let root = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "a question")]), in: conversation).id
        _ = try await bob.waitForCreation(of: root, timeout: .seconds(30))
        let reply = try bob.send(
            bob.newMessage(parts: [MessagePart.with(text: "an answer from node b")], replyTo: root), in: conversation
        ).id
        let received = try await alice.waitForCreation(of: reply, timeout: .seconds(30))
        #expect(received.replyTo == root)
        try await ClientHarness.waitUntil(alice, "the root counts the reply on node a") {
            try alice.message(root)?.threadReplyCount == 1
        }

        // Both nodes hold the reply under its root and derive the same summary.
        for node in [a, b] {
            let summary = try await node.server.store.read { r in try r.threadSummary(of: root) }
            #expect(summary?.replyCount == 1 && summary?.lastReply == reply, "\(node.server.url)")
            let thread = try await node.server.store.read { r in
                try r.threadHistory(root: root, in: conversation, for: "alice", after: nil, limit: 10)
            }
            #expect(thread.map(\.id) == [reply])
            #expect(thread.first?.replyTo == root)
        }
        // A new device of Alice's on node A fetches the thread from there.
        let second = try ClientHarness.device("alice", on: a)
        _ = try await ClientHarness.connectLive(second, on: a)
        try await ClientHarness.waitUntil(second, "the conversation on the second device") {
            try second.conversation(conversation) != nil
        }
        _ = try await second.fetchHistory(of: conversation, policy: .complete)
        // Node A's summary of the root, in its history answer.
        #expect(try second.message(root)?.threadReplyCount == 1)
        #expect(try second.message(root)?.lastThreadReply == reply)
        #expect(try await second.fetchThread(of: root) == [reply])
        #expect(try await PeerReplicationTests.converged([a, b], within: .seconds(30)))
        for client in [alice, bob, second] { try await client.close() }
        await b.stop()
        await a.stop()
    }
}
