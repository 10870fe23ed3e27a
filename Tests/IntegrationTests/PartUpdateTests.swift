import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import Testing

/// Server API part updates (3.0): a backend adds, replaces and removes parts of a sent
/// message; a participant's device sees the message's parts change, with a change
/// notification carrying before and after.
@Suite struct PartUpdateTests {
    static func stored(_ id: MessageID, on node: TestNode) async throws -> Message {
        try #require(try await node.server.engine.store.read { try $0.message(id) }).message
    }

    static func uuid(_ url: Any?, after prefix: String) -> String {
        (url as? String ?? "").components(separatedBy: prefix).last ?? ""
    }

    @Test func partsAreAddedReplacedAndRemovedAndDevicesSeeEachChange() async throws {
        let node = try await TestNode.start("api-parts")
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let changes = bob.changes()
        let api = CurlAPI(node.server, http: .http2)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"sender_id":"layer:///identities/alice","parts":[{"body":"first","mime_type":"text/plain"}]}
                """)
        #expect(sent.status == 201)
        let message = Self.uuid(sent.object["id"], after: "layer:///messages/")
        let messageID = MessageID(uuid: try #require(UUID(uuidString: message)))
        _ = try await bob.waitForCreation(of: messageID, timeout: .seconds(30))
        let path = "/conversations/\(conversation)/messages/\(message)/parts"

        // Add: 201 with the part's id; the device holds both parts and was told.
        let added = try await api.request("POST", path, json: #"{"body":"second","mime_type":"text/plain"}"#)
        #expect(added.status == 201, "\(added.body)")
        let partID = Self.uuid(added.object["id"], after: "/parts/")
        #expect(UUID(uuidString: partID) != nil, "\(added.object)")
        #expect(added.headers["location"]?.hasSuffix("/parts/\(partID)") == true)
        try await ClientHarness.waitUntil(bob, "two parts", timeout: .seconds(30)) {
            try bob.message(messageID)?.message.parts.map(\.inlineBytes) == [Array("first".utf8), Array("second".utf8)]
        }
        var updates: [ObjectChange] = []
        for await batch in changes {
            updates += batch.filter { $0.property == MessageProperty.parts }
            if !updates.isEmpty { break }
        }
        let update = try #require(updates.first)
        #expect(update.type == .update)
        guard case .parts(let before)? = update.before, case .parts(let after)? = update.after else {
            Issue.record("a parts change without parts: \(update)")
            return
        }
        #expect(before.count == 1 && after.count == 2)
        #expect(after.last?.id.uuidString.lowercased() == partID)

        // Replace: same id, new body.
        let replaced = try await api.request(
            "PUT", "\(path)/\(partID)", json: #"{"body":"second, edited","mime_type":"text/plain"}"#)
        #expect(replaced.status == 204, "\(replaced.body)")
        try await ClientHarness.waitUntil(bob, "the edited part", timeout: .seconds(30)) {
            try bob.message(messageID)?.message.parts.last?.inlineBytes == Array("second, edited".utf8)
        }
        // The API shows the message as it is now.
        let shown = try await api.request("GET", "/conversations/\(conversation)/messages/\(message)")
        #expect(
            (shown.object["parts"] as? [[String: Any]])?.compactMap { $0["body"] as? String } == [
                "first", "second, edited",
            ])

        // Remove: the first part goes; the last one cannot.
        let firstID = try #require(bob.message(messageID)?.message.parts.first?.id.uuidString.lowercased())
        let removed = try await api.request("DELETE", "\(path)/\(firstID)")
        #expect(removed.status == 204, "\(removed.body)")
        try await ClientHarness.waitUntil(bob, "one part", timeout: .seconds(30)) {
            try bob.message(messageID)?.message.parts.map(\.inlineBytes) == [Array("second, edited".utf8)]
        }
        let last = try await api.request("DELETE", "\(path)/\(partID)")
        #expect(last.status == 422, "\(last.body)")
        #expect(last.object["id"] as? String == "invalid_property")

        // Bad input: an unknown part, an inline part over 2 KB, and version 1.0.
        let unknown = try await api.request(
            "PUT", "\(path)/\(UUID().uuidString)", json: #"{"body":"x","mime_type":"text/plain"}"#)
        #expect(unknown.status == 404)
        let large = try await api.request(
            "POST", path, json: "{\"body\":\"\(String(repeating: "x", count: 2_049))\",\"mime_type\":\"text/plain\"}")
        #expect(large.status == 422, "\(large.body)")
        let v1 = try await CurlAPI(node.server, http: .http1, version: "1.0").request(
            "POST", path, json: #"{"body":"x","mime_type":"text/plain"}"#)
        #expect(v1.status == 404)
        #expect(v1.object["id"] as? String == "invalid_endpoint")
        // Nothing of the refused requests reached the message.
        let stored = try await Self.stored(messageID, on: node)
        #expect(stored.parts.map(\.inlineBytes) == [Array("second, edited".utf8)])

        try await bob.close()
        await node.stop()
    }

    /// A repeated add with the same If-None-Match adds one part.
    @Test func anAddRepeatedWithIfNoneMatchAddsOnePart() async throws {
        let node = try await TestNode.start("api-parts-idem")
        let api = CurlAPI(node.server, http: .http1)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: #"{"sender_id":"layer:///identities/alice","parts":[{"body":"a","mime_type":"text/plain"}]}"#)
        let message = Self.uuid(sent.object["id"], after: "layer:///messages/")
        let headers = [
            "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
            "If-None-Match": UUID().uuidString,
        ]
        let first = try await api.request(
            "POST", "/conversations/\(conversation)/messages/\(message)/parts",
            json: #"{"body":"b","mime_type":"text/plain"}"#,
            headers: headers)
        let again = try await api.request(
            "POST", "/conversations/\(conversation)/messages/\(message)/parts",
            json: #"{"body":"b","mime_type":"text/plain"}"#,
            headers: headers)
        #expect(first.status == 201 && again.status == 201)
        #expect(first.object["id"] as? String == again.object["id"] as? String)
        let stored = try await Self.stored(MessageID(uuid: try #require(UUID(uuidString: message))), on: node)
        #expect(stored.parts.count == 2)
        await node.stop()
    }
}
