import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import Testing

/// Edits on the Client API WebSocket (CLIENT-API-WEBSOCKET.md; Lamina's `edited_at`, as REST
/// shows it): a message's `create` packet carries the Lamina fields REST shows (here
/// `reply_to`, and no `edited_at` before an edit), and an edit's `update` patches `parts` and
/// sets `edited_at` to the time REST answers.
@Suite struct ClientAPIWebSocketEditTests {
    @Test func anEditPatchesPartsAndSetsEditedAt() async throws {
        let node = try await TestNode.start("ws-edits")
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http1)
        let bob = try await ClientAPICurl.session("bob", on: node, http: .http1)
        let created = try await alice.request("POST", "/conversations", json: #"{"participants":["bob"]}"#)
        let conversation = (created.object["id"] as? String ?? "").replacingOccurrences(
            of: "layer:///conversations/", with: "")

        let packets = ClientAPIWebSocketChangeTests.Packets()
        let socket = try await ClientAPIWebSocketChangeTests.socket(
            of: alice, on: node, onText: { packets.add($0) })

        let sent = try await bob.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"parts":[{"mime_type":"text/plain","body":"draft"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let rootID = try #require(sent.object["id"] as? String)
        let root = rootID.replacingOccurrences(of: "layer:///messages/", with: "")
        let reply = try await bob.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"reply_to":"\#(rootID)","parts":[{"mime_type":"text/plain","body":"and more"}]}"#)
        #expect(reply.status == 201, "\(reply.body)")
        let replyID = try #require(reply.object["id"] as? String)

        // The creates: the root never edited (no `edited_at`), the reply with its root.
        let rootCreate = await packets.change("create", "Message") { body in
            (body["data"] as? [String: Any])?["id"] as? String == rootID
        }
        let rootData = rootCreate?["data"] as? [String: Any]
        #expect(rootData != nil && rootData?["edited_at"] == nil, "\(String(describing: rootCreate))")
        let replyCreate = await packets.change("create", "Message") { body in
            (body["data"] as? [String: Any])?["id"] as? String == replyID
        }
        #expect(
            (replyCreate?["data"] as? [String: Any])?["reply_to"] as? String == rootID,
            "\(String(describing: replyCreate))")

        // Bob edits the root: Alice's socket gets the new parts and the edit's time, as REST shows it.
        let edited = try await bob.request(
            "PATCH", "/messages/\(root)", json: #"{"parts":[{"mime_type":"text/plain","body":"final"}]}"#)
        #expect(edited.status == 200, "\(edited.body)")
        let editedAt = try #require(edited.object["edited_at"] as? String)
        let update = await packets.change("update", "Message") { body in
            (body["object"] as? [String: Any])?["id"] as? String == rootID
        }
        let operations = update?["data"] as? [[String: Any]] ?? []
        #expect(operations.map { $0["property"] as? String } == ["parts", "edited_at"], "\(operations)")
        let parts = operations.first?["value"] as? [[String: Any]]
        #expect(parts?.first?["body"] as? String == "final")
        #expect(operations.last?["operation"] as? String == "set")
        #expect(operations.last?["value"] as? String == editedAt)
        await socket.close()
        await node.stop()
    }
}
