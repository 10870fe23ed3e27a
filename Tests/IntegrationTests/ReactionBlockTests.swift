import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// A blocker sees none of a blocked user's reactions (SPEC §6.2 block lists, §6.9), wherever
/// reactions reach them on a real node: live `reactions-changed`, the reactions that follow a
/// history page and a snapshot's latest messages, and the `reactions` of the Server API's
/// messages read as the user and of the Client API's. The system's view shows them all.
@Suite struct ReactionBlockTests {
    static func reactors(_ changes: [Change], on message: MessageID) -> Set<String> {
        Set(
            changes.compactMap { change -> String? in
                guard change.seq == 0, case .reactionsChanged(let r) = change.event, r.messageID == message, r.present
                else { return nil }
                return "\(r.user) \(r.key)"
            })
    }

    static func reactors(_ object: [String: Any]) -> Set<String> {
        let all = object["reactions"] as? [String: [String: Any]] ?? [:]
        return Set(
            all.flatMap { key, summary in
                ((summary["user_ids"] as? [String]) ?? []).map {
                    "\($0.replacingOccurrences(of: "layer:///identities/", with: "")) \(key)"
                }
            })
    }

    @Test func aBlockersHistorySnapshotsAndAPIsLeaveOutTheBlockedUsersReactions() async throws {
        let node = try await TestNode.start("reactions-blocks")
        let alice = try await node.session(ReactionTests.alice, device: UUID())
        let bob = try await node.session(ReactionTests.bob, device: UUID())
        let carol = try await node.session(ReactionTests.carol, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [ReactionTests.bob, ReactionTests.carol])
        let (message, _) = try await MessagingTests.send(alice, conversation, "react to me")
        _ = try await carol.message(message)
        let block = UUID()
        try await carol.command(
            .blockUser(BlockUser(requestID: block, user: ReactionTests.bob, blocking: true)), id: block)

        // Live: Carol is told of Alice's reaction (made after Bob's), never of Bob's.
        try await ReactionTests.react(bob, conversation, message, "+1", .add)
        try await ReactionTests.react(alice, conversation, message, "ok", .add)
        _ = try await carol.change {
            if case .reactionsChanged(let r) = $0.event { return r.key == "ok" }
            return false
        }
        #expect(
            !carol.seenChanges.contains {
                if case .reactionsChanged(let r) = $0.event { r.user == ReactionTests.bob } else { false }
            })
        // Alice (who blocks no one) is told of both.
        _ = try await ReactionTests.reactionChange(alice, message, present: true)

        // FETCH_HISTORY: Carol's page is followed by Alice's reaction only; Alice's by both.
        for (session, expected) in [(carol, ["alice ok"]), (alice, ["alice ok", "bob +1"])] {
            let fetch = UUID()
            let before = session.seenChangeCount
            session.send(.fetchHistory(FetchHistory(requestID: fetch, conversationID: conversation, policy: .complete)))
            _ = try await session.answer(to: fetch)
            let answer = Array(session.seenChanges.dropFirst(before))
            #expect(Self.reactors(answer, on: message) == Set(expected), "\(answer.map(\.kind))")
        }

        // A snapshot for a new device of Carol's: the latest message without Bob's reaction.
        let fresh = try await node.connect()
        _ = try await fresh.hello(features: FeatureSet.all.union(.snapshots))
        _ = try await fresh.authenticate(user: ReactionTests.carol, device: UUID(), dev: node.dev)
        let snapshot = try await fresh.sync(from: 0).changes
        #expect(snapshot.contains { if case .messageCreated(let m) = $0.event { m.id == message } else { false } })
        #expect(Self.reactors(snapshot, on: message) == ["alice ok"], "\(snapshot.map(\.kind))")

        // The Server API as Carol leaves Bob's reaction out; as the system it shows both.
        let api = CurlAPI(node.server, http: .http1)
        let id = message.uuid.uuidString.lowercased()
        let conversationPath = conversation.uuid.uuidString.lowercased()
        let asCarol = try await api.request("GET", "/users/carol/messages/\(id)")
        #expect(asCarol.status == 200, "\(asCarol.body)")
        #expect(Self.reactors(asCarol.object) == ["alice ok"], "\(asCarol.body)")
        let listed = try await api.request("GET", "/users/carol/conversations/\(conversationPath)/messages")
        let first = (try JSONSerialization.jsonObject(with: Data(listed.body.utf8)) as? [[String: Any]])?.first
        #expect(Self.reactors(first ?? [:]) == ["alice ok"], "\(listed.body)")
        let system = try await api.request("GET", "/conversations/\(conversationPath)/messages/\(id)")
        #expect(Self.reactors(system.object) == ["alice ok", "bob +1"], "\(system.body)")

        // The Client API: Carol's session leaves it out, Alice's shows it.
        let carolREST = try await ClientAPICurl.session("carol", on: node, http: .http1)
        let seen = try await carolREST.request("GET", "/messages/\(id)")
        #expect(Self.reactors(seen.object) == ["alice ok"], "\(seen.body)")
        let page = try await carolREST.request("GET", "/conversations/\(conversationPath)/messages")
        let newest = (try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [[String: Any]])?.first
        #expect(Self.reactors(newest ?? [:]) == ["alice ok"], "\(page.body)")
        let aliceREST = try await ClientAPICurl.session("alice", on: node, http: .http1)
        let shown = try await aliceREST.request("GET", "/messages/\(id)")
        #expect(Self.reactors(shown.object) == ["alice ok", "bob +1"], "\(shown.body)")
        for s in [alice, bob, carol, fresh] { await s.close() }
        await node.stop()
    }
}
