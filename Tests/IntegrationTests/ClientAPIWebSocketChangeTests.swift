import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// `change` packets for identities and announcements on the Client API WebSocket (TLS,
/// HTTP/1.1 Upgrade): real display names in packets, an identity's profile change reaching a
/// socket that shares a conversation with it, an announcement as an `Announcement` (its
/// conversation never shown).
@Suite struct ClientAPIWebSocketChangeTests {
    /// `session`'s WebSocket on `node` (TLS, HTTP/1.1 Upgrade, subprotocol `layer-3.0`).
    static func socket(
        of session: ClientAPICurl, on node: TestNode, onText: @escaping @Sendable (ByteBuffer) -> Void
    ) async throws -> WebSocketClient {
        var tls = TLSConfiguration.client(trust: .caFile(node.server.prepared.certificatePath))
        tls.offersHTTP1 = true
        let url = URL(string: node.server.url)!
        return try await WebSocketClient.connect(
            host: url.host ?? "127.0.0.1", port: url.port ?? 0,
            path: "/websocket?session_token=\(session.sessionToken ?? "")", subprotocols: ["layer-3.0"],
            tls: try TLSContext(tls), group: Fixtures.group, onText: onText)
    }

    /// The packets a socket received, decoded.
    final class Packets: @unchecked Sendable {
        let all = NIOLockedValueBox<[[String: Any]]>([])

        func add(_ text: ByteBuffer) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(text.readableBytesView)) as? [String: Any]
            else { return }
            all.withLockedValue { $0.append(object) }
        }

        /// The first `change` packet of `operation` on an object of `type` that `match` accepts,
        /// waiting up to 15 s for it.
        func change(
            _ operation: String, _ type: String, where match: @escaping ([String: Any]) -> Bool = { _ in true }
        ) async -> [String: Any]? {
            let deadline = Date().addingTimeInterval(15)
            while Date() < deadline {
                let found = all.withLockedValue { packets in
                    packets.first { packet in
                        guard packet["type"] as? String == "change", let body = packet["body"] as? [String: Any],
                            body["operation"] as? String == operation,
                            (body["object"] as? [String: Any])?["type"] as? String == type
                        else { return false }
                        return match(body)
                    }
                }
                if let found { return found["body"] as? [String: Any] }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return nil
        }
    }

    @Test func identitiesAndAnnouncementsArriveAsChangePackets() async throws {
        let node = try await TestNode.start("capi-ws-identity")
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http1)
        let bob = try await ClientAPICurl.session("bob", on: node, http: .http1)
        let server = CurlAPI(node.server, http: .http1)
        #expect(
            try await server.request("POST", "/users/bob/identity", json: #"{"display_name":"Bob B."}"#).status == 201)
        let created = try await alice.request("POST", "/conversations", json: #"{"participants":["bob"]}"#)
        #expect(created.status == 201)
        let conversation = (created.object["id"] as? String ?? "").replacingOccurrences(
            of: "layer:///conversations/", with: "")

        let packets = Packets()
        let socket = try await ClientAPIWebSocketChangeTests.socket(
            of: alice, on: node, onText: { packets.add($0) })

        // Bob's message shows bob's display name (read when the socket opened), not his user id.
        #expect(
            try await bob.request(
                "POST", "/conversations/\(conversation)/messages",
                json: #"{"parts":[{"mime_type":"text/plain","body":"hi"}]}"#
            ).status == 201)
        let message = await packets.change("create", "Message")
        let sender = (message?["data"] as? [String: Any])?["sender"] as? [String: Any]
        #expect(sender?["display_name"] as? String == "Bob B.")

        // Bob's profile changes: alice (who shares a conversation with him) gets an Identity update.
        #expect(
            try await server.request(
                "PATCH", "/users/bob/identity",
                json: #"[{"operation":"set","property":"display_name","value":"Robert"}]"#,
                contentType: "application/vnd.layer-patch+json"
            ).status == 204)
        let identity = await packets.change("update", "Identity")
        #expect((identity?["object"] as? [String: Any])?["id"] as? String == "layer:///identities/bob")
        let operations = identity?["data"] as? [[String: Any]] ?? []
        #expect(
            operations.contains {
                $0["operation"] as? String == "set" && $0["property"] as? String == "display_name"
                    && $0["value"] as? String == "Robert"
            })
        // Later packets show the new name.
        #expect(
            try await bob.request(
                "POST", "/conversations/\(conversation)/messages",
                json: #"{"parts":[{"mime_type":"text/plain","body":"again"}]}"#
            ).status == 201)
        let renamed = await packets.change("create", "Message") { body in
            (((body["data"] as? [String: Any])?["parts"] as? [[String: Any]])?.first?["body"] as? String) == "again"
        }
        #expect(
            ((renamed?["data"] as? [String: Any])?["sender"] as? [String: Any])?["display_name"] as? String == "Robert")

        // An announcement: an Announcement object; its conversation is never shown.
        let announced = try await server.request(
            "POST", "/announcements",
            json:
                #"{"recipients":["alice"],"sender":{"name":"Admin"},"parts":[{"mime_type":"text/plain","body":"news"}]}"#
        )
        #expect(announced.status == 202)
        let announcement = await packets.change("create", "Announcement")
        #expect(
            ((announcement?["object"] as? [String: Any])?["id"] as? String)?.hasPrefix("layer:///announcements/")
                == true)
        #expect(
            (((announcement?["data"] as? [String: Any])?["parts"] as? [[String: Any]])?.first?["body"] as? String)
                == "news")
        let conversationCreates = packets.all.withLockedValue { all in
            all.filter {
                let body = $0["body"] as? [String: Any]
                return body?["operation"] as? String == "create"
                    && (body?["object"] as? [String: Any])?["type"] as? String == "Conversation"
            }.count
        }
        // The conversation with bob predates the socket, and its creator (alice) is not told of
        // it again with its first message; the announcements conversation is never shown.
        #expect(conversationCreates == 0)
        await socket.close()
        await node.stop()
    }
}
