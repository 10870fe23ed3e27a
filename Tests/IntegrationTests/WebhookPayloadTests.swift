import Foundation
import LaminaNode
import LaminaTransport
import Testing

/// Every Layer 3.0 event type on a real node (Protocol/WEBHOOKS.md), its actions taken over
/// HTTP/1.1 and HTTP/2: one webhook subscribed to all of them by their 3.0 names receives each
/// once, with Layer's headers (the signature checked with openssl) and, field by field, the
/// payload the table shows: receipts, parts, identities, the changes of an update, deletions
/// carrying the object as it was.
@Suite struct WebhookPayloadTests {
    static let names = [
        "Conversation.created", "Conversation.updated", "Conversation.deleted", "Message.created", "Message.deleted",
        "Receipt.created", "MessagePart.created", "MessagePart.updated", "MessagePart.deleted", "Identity.created",
        "Identity.updated", "Identity.deleted",
    ]

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func everyEventTypeArrivesOnceWithLayersHeadersAndPayload(http: CurlAPI.HTTP) async throws {
        let receiver = try await WebhookReceiver.start()
        let node = try await WebhookTests.node("webhook-payloads-\(http == .http1 ? "h1" : "h2")", trusting: receiver)
        let api = CurlAPI(node.server, http: http)
        let webhook = try await WebhookEventNameTests.register(
            api, url: receiver.url("/all"), key: "events", names: Self.names)
        _ = try await WebhookTests.waitForStatus(api, webhook, "active")

        // Identity: created, updated, (deleted below).
        let put = try await api.request(
            "PUT", "/users/carol/identity",
            json: #"{"display_name":"Carol","first_name":"Carol","metadata":{"team":"blue"}}"#)
        #expect(put.status == 204, "\(put.body)")
        let patchedIdentity = try await api.request(
            "PATCH", "/users/carol/identity",
            json: #"[{"operation":"set","property":"display_name","value":"Carol C."}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(patchedIdentity.status == 204, "\(patchedIdentity.body)")

        // Conversation: created, updated twice (metadata, participants).
        let conversation = try await WebhookTests.conversation(api)
        for (operation, name) in [
            (#"{"operation":"set","property":"metadata.title","value":"Hooks"}"#, "metadata"),
            (#"{"operation":"add","property":"participants","value":"carol"}"#, "participants"),
        ] {
            let patched = try await api.request(
                "PATCH", "/conversations/\(conversation)", json: "[\(operation)]",
                contentType: "application/vnd.layer-patch+json")
            #expect(patched.status == 204, "\(name): \(patched.body)")
        }

        // Message: created; bob's delivery and read receipts over the Client API.
        let message = try await WebhookTests.send(api, in: conversation, "hello payloads")
        let bob = try await ClientAPICurl.session("bob", on: node, http: http)
        for type in ["delivery", "read"] {
            let receipt = try await bob.request("POST", "/messages/\(message)/receipts", json: #"{"type":"\#(type)"}"#)
            #expect(receipt.status == 204, "\(type): \(receipt.body)")
        }

        // Parts: one added, changed, removed (3.0).
        let partsPath = "/conversations/\(conversation)/messages/\(message)/parts"
        let added = try await api.request("POST", partsPath, json: #"{"mime_type":"text/plain","body":"second"}"#)
        #expect(added.status == 201, "\(added.body)")
        let partID = try #require((added.object["id"] as? String)?.components(separatedBy: "/").last)
        let replaced = try await api.request(
            "PUT", "\(partsPath)/\(partID)", json: #"{"mime_type":"text/plain","body":"second, edited"}"#)
        #expect(replaced.status == 204, "\(replaced.body)")
        #expect(try await api.request("DELETE", "\(partsPath)/\(partID)").status == 204)

        // Deletions.
        #expect(try await api.request("DELETE", "/users/carol/identity").status == 204)
        #expect(try await api.request("DELETE", "/conversations/\(conversation)/messages/\(message)").status == 204)
        #expect(try await api.request("DELETE", "/conversations/\(conversation)").status == 204)

        let twice: Set = ["Conversation.updated", "Receipt.created"]
        let expected = Self.names.count + twice.count
        let posts = try await receiver.waitForPosts(expected, timeout: .seconds(60))
        #expect(posts.count == expected)
        let byName = Dictionary(grouping: posts) { $0.headers["layer-webhook-event-type"] ?? "" }
        #expect(Set(byName.keys) == Set(Self.names))
        for name in Self.names {
            #expect(byName[name]?.count == (twice.contains(name) ? 2 : 1), "\(name)")
        }
        // One event id per event.
        #expect(Set(posts.compactMap { ($0.json["event"] as? [String: Any])?["id"] as? String }).count == expected)

        for post in posts {
            let name = post.headers["layer-webhook-event-type"] ?? ""
            #expect(post.path == "/all")
            #expect(post.headers["content-type"] == "application/vnd.layer.webhooks+json; version=3.0")
            #expect(post.headers["user-agent"] == "layer-webhooks/3.0")
            #expect(post.headers["layer-webhook-id"] == webhook)
            #expect(UUID(uuidString: post.headers["layer-webhook-request-id"] ?? "") != nil)
            #expect(try await Self.signature(of: post.body) == post.headers["layer-webhook-signature"], "\(name)")
            let event = post.json["event"] as? [String: Any]
            #expect(event?["type"] as? String == name)
            #expect(UUID(uuidString: event?["id"] as? String ?? "") != nil)
            #expect((event?["created_at"] as? String)?.hasSuffix("Z") == true)
        }

        func one(_ name: String) -> [String: Any] { byName[name]?.first?.json ?? [:] }
        func actor(_ payload: [String: Any]) -> String? { (payload["actor"] as? [String: Any])?["user_id"] as? String }
        let conversationID = "layer:///conversations/\(conversation)"
        let messageID = "layer:///messages/\(message)"

        // Identities: no actor (the backend), the identity object.
        for (name, displayName) in [
            ("Identity.created", "Carol"), ("Identity.updated", "Carol C."), ("Identity.deleted", "Carol C."),
        ] {
            let payload = one(name)
            #expect(payload["actor"] == nil, "\(name)")
            let identity = payload["identity"] as? [String: Any]
            #expect(identity?["id"] as? String == "layer:///identities/carol", "\(name)")
            #expect(identity?["user_id"] as? String == "carol", "\(name)")
            #expect(identity?["display_name"] as? String == displayName, "\(name)")
            #expect(identity?["first_name"] as? String == "Carol", "\(name)")
            #expect((identity?["metadata"] as? [String: String]) == ["team": "blue"], "\(name)")
            #expect((identity?["url"] as? String)?.hasSuffix("/users/carol/identity") == true, "\(name)")
        }

        // Conversation.created: the whole conversation.
        let created = one("Conversation.created")["conversation"] as? [String: Any]
        #expect(created?["id"] as? String == conversationID)
        #expect(
            (created?["participants"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == ["alice", "bob"])

        // Conversation.updated: the conversation as it is now and what changed, old and new.
        let updates = (byName["Conversation.updated"] ?? []).map(\.json)
        let changes = updates.compactMap { ($0["changes"] as? [[String: Any]])?.first }
        #expect(updates.allSatisfy { ($0["changes"] as? [Any])?.count == 1 })
        let title = changes.first { $0["property"] as? String == "metadata.title" }
        #expect(title?["old_value"] is NSNull)
        #expect(title?["new_value"] as? String == "Hooks")
        let participants = changes.first { $0["property"] as? String == "participants" }
        #expect(
            (participants?["old_value"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == [
                "alice", "bob",
            ])
        #expect(
            (participants?["new_value"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String }
                == ["alice", "bob", "carol"])
        #expect(
            (participants?["new_value"] as? [[String: Any]])?.last?["id"] as? String == "layer:///identities/carol")
        #expect(updates.allSatisfy { ($0["conversation"] as? [String: Any])?["id"] as? String == conversationID })
        #expect(updates.allSatisfy { ($0["actor"] as? [String: Any])?["id"] as? String != nil })

        // Message.created.
        let sent = one("Message.created")["message"] as? [String: Any]
        #expect(sent?["id"] as? String == messageID)
        #expect((sent?["parts"] as? [[String: Any]])?.first?["body"] as? String == "hello payloads")
        #expect(actor(one("Message.created")) == "alice")

        // Receipt.created: bob's delivery and read receipts, by position.
        let receipts = (byName["Receipt.created"] ?? []).map(\.json)
        #expect(
            Set(receipts.compactMap { ($0["receipt"] as? [String: Any])?["type"] as? String }) == ["delivery", "read"])
        for payload in receipts {
            #expect(actor(payload) == "bob")
            let receipt = payload["receipt"] as? [String: Any]
            #expect((receipt?["conversation"] as? [String: Any])?["id"] as? String == conversationID)
            #expect(receipt?["position"] as? Int64 == sent?["position"] as? Int64)
            if receipt?["type"] as? String == "read" {
                // A read receipt names its message.
                #expect((receipt?["message"] as? [String: Any])?["id"] as? String == messageID)
            }
        }

        // MessagePart.*: the part and its message.
        for (name, body) in [
            ("MessagePart.created", "second"), ("MessagePart.updated", "second, edited"),
            ("MessagePart.deleted", "second, edited"),
        ] {
            let payload = one(name)
            #expect(actor(payload) == "alice", "\(name)")
            let part = payload["message_part"] as? [String: Any]
            #expect(part?["id"] as? String == "\(messageID)/parts/\(partID)", "\(name)")
            #expect(part?["body"] as? String == body, "\(name)")
            #expect(part?["mime_type"] as? String == "text/plain", "\(name)")
            let of = payload["message"] as? [String: Any]
            #expect(of?["id"] as? String == messageID, "\(name)")
            #expect((of?["conversation"] as? [String: Any])?["id"] as? String == conversationID, "\(name)")
        }

        // Deletions carry the object as it was.
        let deletedMessage = one("Message.deleted")["message"] as? [String: Any]
        #expect(deletedMessage?["id"] as? String == messageID)
        #expect((deletedMessage?["parts"] as? [[String: Any]])?.first?["body"] as? String == "hello payloads")
        #expect((deletedMessage?["sender"] as? [String: Any])?["user_id"] as? String == "alice")
        let deletedConversation = one("Conversation.deleted")["conversation"] as? [String: Any]
        #expect(deletedConversation?["id"] as? String == conversationID)
        #expect(
            (deletedConversation?["participants"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String }
                == ["alice", "bob", "carol"])
        #expect((deletedConversation?["metadata"] as? [String: Any])?["title"] as? String == "Hooks")

        await node.stop()
        await receiver.stop()
    }

    /// HMAC-SHA1 of `body` keyed by the webhook's secret, by openssl (not our code).
    static func signature(of body: [UInt8]) async throws -> String? {
        let file = Fixtures.temporaryDirectory("webhook-payload").appendingPathComponent("body.json")
        try Data(body).write(to: file)
        let digest = try await ExternalCommand.run(
            "/usr/bin/openssl", ["dgst", "-sha1", "-hmac", WebhookTests.secret, "-r", file.path])
        return digest.stdout.split(separator: " ").first.map(String.init)
    }
}
