import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Testing

/// Which node tells a webhook (Protocol/WEBHOOKS.md, "Which node sends an event"): the node
/// that accepted the command, never a peer that applies its replicated operation. Two peered
/// nodes, a webhook registered with each for `Message.created` and `Message.reactions_changed`:
/// Alice sends and reacts on A, Bob reacts on B; A's webhook hears only of Alice's commands and
/// B's only of Bob's, though each node holds all of them.
@Suite struct WebhooksAcrossPeersTests {
    static let names = ["Message.created", "Message.reactions_changed"]

    static func start(_ name: String, _ id: NodeID, peers: [String], receiver: WebhookReceiver, certificates: URL)
        async throws -> TestNode
    {
        try await TestNode.start(name) { c in
            c.nodeID = id.rawValue
            c.peers = try! DevelopmentCluster.settings(for: id, port: 0, peers: peers, in: certificates)
            c.peers.reconnectMinimumMilliseconds = 20
            c.peers.reconnectMaximumMilliseconds = 200
            c.webhooks.allowPrivateTargets = true
            c.webhooks.caFile = receiver.certificate
            c.webhooks.initialBackoffMilliseconds = 50
        }
    }

    /// What each POST to `path` told: "created <message>" or "<user> <key> <present>".
    static func told(_ receiver: WebhookReceiver, _ path: String) -> [String] {
        receiver.posts.filter { $0.path == path }.map { post in
            let json = post.json
            if let reaction = json["reaction"] as? [String: Any] {
                let user = (reaction["user_id"] as? String ?? "").replacingOccurrences(
                    of: "layer:///identities/", with: "")
                return "\(user) \(reaction["key"] as? String ?? "") \(reaction["present"] as? Bool ?? false)"
            }
            let id = ((json["message"] as? [String: Any])?["id"] as? String ?? "").replacingOccurrences(
                of: "layer:///messages/", with: "")
            return "created \(id)"
        }
    }

    @Test func eachNodeTellsItsWebhooksOfTheCommandsItAcceptedOnly() async throws {
        let receiver = try await WebhookReceiver.start()
        let certificates = Fixtures.temporaryDirectory("webhooks-peers-certs")
        let a = try await Self.start(
            "webhooks-peers-a", PeerReplicationTests.nodeA, peers: [], receiver: receiver, certificates: certificates)
        let b = try await Self.start(
            "webhooks-peers-b", PeerReplicationTests.nodeB,
            peers: ["https://127.0.0.1:\(a.server.peers!.transport.port)"], receiver: receiver,
            certificates: certificates)
        var webhooks: [(TestNode, UUID)] = []
        for (node, path) in [(a, "/a"), (b, "/b")] {
            let api = CurlAPI(node.server)
            let id = try await WebhookEventNameTests.register(
                api, url: receiver.url(path), key: "events", names: Self.names)
            _ = try await WebhookTests.waitForStatus(api, id, "active")
            webhooks.append((node, try #require(UUID(uuidString: id))))
        }

        let alice = try await a.session(ReactionTests.alice, device: UUID())
        let bob = try await b.session(ReactionTests.bob, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [ReactionTests.bob])
        let (message, _) = try await MessagingTests.send(alice, conversation, "told once")
        try await ReactionTests.react(alice, conversation, message, "+1", .add)
        // Both reached B (Bob's feed there tells them); then Bob reacts on B.
        _ = try await bob.change {
            if case .reactionsChanged(let r) = $0.event { return r.key == "+1" && r.user == ReactionTests.alice }
            return false
        }
        try await ReactionTests.react(bob, conversation, message, "ok", .add)
        // Bob's reaction reached A; then Alice's last reaction on A.
        _ = try await alice.change {
            if case .reactionsChanged(let r) = $0.event { return r.key == "ok" && r.user == ReactionTests.bob }
            return false
        }
        try await ReactionTests.react(alice, conversation, message, "+1", .remove)
        // Which reached B too.
        _ = try await bob.change {
            if case .reactionsChanged(let r) = $0.event { return r.key == "+1" && !r.present }
            return false
        }

        // Each webhook got the last event its node queued, and every event either queued is
        // delivered (its queue is empty): what each got is all it will get.
        let deadline = ContinuousClock.now + .seconds(60)
        var drained = false
        while ContinuousClock.now < deadline {
            let arrived =
                Self.told(receiver, "/a").contains("alice +1 false")
                && Self.told(receiver, "/b").contains("bob ok true")
            var empty = true
            for (node, id) in webhooks {
                let queued = try await node.server.store.read { r in try r.queuedWebhookEvents(of: id, limit: 10) }
                empty = empty && queued.isEmpty
            }
            if arrived && empty {
                drained = true
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(drained, "\(receiver.posts.map { "\($0.path) \(String(decoding: $0.body, as: UTF8.self))" })")
        let id = message.uuid.uuidString.lowercased()
        #expect(Set(Self.told(receiver, "/a")) == ["created \(id)", "alice +1 true", "alice +1 false"])
        #expect(Self.told(receiver, "/a").count == 3)
        #expect(Self.told(receiver, "/b") == ["bob ok true"])
        // Each node holds everything all the same.
        for node in [a, b] {
            let present = try await node.server.store.read { r in try r.presentReactions(on: [message]) }
            #expect(present.map { "\($0.user) \($0.key)" } == ["bob ok"])
        }
        for s in [alice, bob] { await s.close() }
        await b.stop()
        await a.stop()
        await receiver.stop()
    }
}
