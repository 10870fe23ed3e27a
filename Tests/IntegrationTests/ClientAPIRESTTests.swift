import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaTransport
import Testing

/// Layer's Client API (REST) on a real node, through curl over HTTP/1.1 and HTTP/2: sessions,
/// conversations, messages, receipts, errors; and interop with the SDK both ways.
@Suite struct ClientAPIRESTTests {
    static func uuid(_ object: [String: Any], _ prefix: String) -> String {
        (object["id"] as? String ?? "").replacingOccurrences(of: prefix, with: "")
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func aConversationIsCreatedMessagedReadPatchedAndDeleted(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("capi-flow-\(http == .http1 ? "h1" : "h2")")
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let bob = try await ClientAPICurl.session("bob", on: node, http: http)

        // Distinct: created once (201), found the second time (200, the same id).
        let created = try await alice.request(
            "POST", "/conversations", json: #"{"participants":["layer:///identities/bob"],"distinct":true}"#)
        #expect(created.status == 201)
        #expect(created.httpVersion == (http == .http1 ? "1.1" : "2"))
        let id = Self.uuid(created.object, "layer:///conversations/")
        #expect(UUID(uuidString: id) != nil)
        #expect(
            (created.object["participants"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [
                "layer:///identities/alice", "layer:///identities/bob",
            ])
        #expect(created.object["unread_message_count"] as? Int == 0)
        let again = try await bob.request(
            "POST", "/conversations", json: #"{"participants":["alice"],"distinct":true}"#)
        #expect(again.status == 200)
        #expect(Self.uuid(again.object, "layer:///conversations/") == id)

        // A message with a client-chosen id; the same request again is the same message.
        let messageID = UUID().uuidString.lowercased()
        let send =
            #"{"id":"layer:///messages/\#(messageID)","parts":[{"mime_type":"text/plain","body":"hello bob"}],"notification":{"text":"alice: hello","sound":"chime"}}"#
        let sent = try await alice.request("POST", "/conversations/\(id)/messages", json: send)
        #expect(sent.status == 201)
        #expect(sent.object["id"] as? String == "layer:///messages/\(messageID)")
        #expect((sent.object["parts"] as? [[String: Any]])?.first?["body"] as? String == "hello bob")
        #expect((sent.object["sender"] as? [String: Any])?["user_id"] as? String == "alice")
        #expect((sent.object["position"] as? Int ?? 0) > 0)
        let retried = try await alice.request("POST", "/conversations/\(id)/messages", json: send)
        #expect(retried.status == 201)
        #expect(retried.object["id"] as? String == "layer:///messages/\(messageID)")
        let clash = try await alice.request(
            "POST", "/conversations/\(id)/messages",
            json: #"{"id":"layer:///messages/\#(messageID)","parts":[{"mime_type":"text/plain","body":"other"}]}"#)
        #expect(clash.status == 409)
        #expect(clash.object["id"] as? String == "id_in_use")
        #expect((clash.object["data"] as? [String: Any])?["id"] as? String == "layer:///messages/\(messageID)")

        // Bob's view: one message, unread, counted in Layer-Count.
        let listed = try await bob.request("GET", "/conversations/\(id)/messages?page_size=10")
        #expect(listed.status == 200)
        #expect(listed.headers["layer-count"] == "1")
        #expect(listed.array.count == 1)
        #expect(listed.array.first?["is_unread"] as? Bool == true)
        let conversations = try await bob.request("GET", "/conversations")
        #expect(conversations.headers["layer-count"] == "1")
        #expect(conversations.array.first?["unread_message_count"] as? Int == 1)
        #expect(
            (conversations.array.first?["last_message"] as? [String: Any])?["id"] as? String
                == "layer:///messages/\(messageID)")

        // Bob reads it: alice sees bob's read status.
        let receipt = try await bob.request("POST", "/messages/\(messageID)/receipts", json: #"{"type":"read"}"#)
        #expect(receipt.status == 204)
        let seen = try await alice.request("GET", "/messages/\(messageID)")
        #expect((seen.object["recipient_status"] as? [String: String])?["layer:///identities/bob"] == "read")
        let bobsView = try await bob.request("GET", "/conversations/\(id)")
        #expect(bobsView.object["unread_message_count"] as? Int == 0)

        // PATCH: carol joins (Layer's `id` form), metadata set; applied together.
        let patch =
            #"[{"operation":"add","property":"participants","id":"layer:///identities/carol"},{"operation":"set","property":"metadata.title","value":"Lunch"}]"#
        let patched = try await alice.request(
            "PATCH", "/conversations/\(id)", json: patch, contentType: "application/vnd.layer-patch+json")
        #expect(patched.status == 204)
        let after = try await alice.request("GET", "/conversations/\(id)")
        #expect(
            (after.object["participants"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == [
                "alice", "bob", "carol",
            ])
        #expect((after.object["metadata"] as? [String: Any])?["title"] as? String == "Lunch")
        let wrongType = try await alice.request("PATCH", "/conversations/\(id)", json: patch)
        #expect(wrongType.status == 415)

        // Deleted for everyone: gone for bob too.
        let deleted = try await alice.request("DELETE", "/conversations/\(id)?mode=all_participants")
        #expect(deleted.status == 204)
        let gone = try await bob.request("GET", "/conversations/\(id)")
        #expect(gone.status == 410)
        #expect(gone.object["id"] as? String == "object_deleted")
        await node.stop()
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func refusalsAreLayersErrorObjects(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("capi-errors-\(http == .http1 ? "h1" : "h2")")
        var alice = try await ClientAPICurl.session("alice", on: node, http: http)

        // No session, a made-up one: 401 with a fresh nonce to log in with.
        var anonymous = ClientAPICurl(node, http: http)
        for token in [nil, "not-a-session"] {
            anonymous.sessionToken = token
            let refused = try await anonymous.request("GET", "/conversations")
            #expect(refused.status == 401)
            #expect(refused.object["id"] as? String == "authentication_required")
            #expect(refused.object["code"] as? Int == 4)
            #expect(((refused.object["data"] as? [String: Any])?["nonce"] as? String)?.isEmpty == false)
        }
        // The nonce of a 401 logs in.
        anonymous.sessionToken = nil
        let refused = try await anonymous.request("GET", "/conversations")
        let nonce = (refused.object["data"] as? [String: Any])?["nonce"] as? String ?? ""
        let token = try node.dev.mintToken(user: "bob", nonce: nonce)
        let appID = node.server.serverAPICredentials!.appID
        let login = try await anonymous.request(
            "POST", "/sessions", json: #"{"identity_token":"\#(token)","app_id":"\#(appID)"}"#)
        #expect(login.status == 201)
        // A nonce is single use: the same token again is refused, with a new nonce.
        let replay = try await anonymous.request(
            "POST", "/sessions", json: #"{"identity_token":"\#(token)","app_id":"\#(appID)"}"#)
        #expect(replay.status == 401)
        #expect((replay.object["data"] as? [String: Any])?["reason"] as? String == "nonce-reused")

        // A bad Accept: 406.
        let badAccept = try await alice.request(
            "GET", "/conversations",
            headers: ["Accept": "application/json", "Authorization": alice.headers["Authorization"]!])
        #expect(badAccept.status == 406)
        #expect(badAccept.object["id"] as? String == "invalid_header")
        let oldVersion = try await alice.request(
            "GET", "/conversations",
            headers: [
                "Accept": "application/vnd.layer+json; version=1.0", "Authorization": alice.headers["Authorization"]!,
            ])
        #expect(oldVersion.status == 406)

        // Malformed JSON and bad properties: Layer's error shape.
        let malformed = try await alice.request("POST", "/conversations", json: #"{"participants": ["bob""#)
        #expect(malformed.status == 400)
        #expect(malformed.object["id"] as? String == "invalid_request")
        #expect(malformed.object["code"] as? Int == 10)
        #expect((malformed.object["message"] as? String)?.isEmpty == false)
        #expect((malformed.object["url"] as? String)?.isEmpty == false)
        let badPart = try await alice.request(
            "POST", "/conversations", json: #"{"participants": [42]}"#)
        #expect(badPart.status == 422)
        #expect((badPart.object["data"] as? [String: Any])?["property"] as? String == "participants")
        let unknown = try await alice.request("GET", "/conversations/\(UUID().uuidString)")
        #expect(unknown.status == 404)
        #expect(unknown.object["id"] as? String == "not_found")
        let wrongMethod = try await alice.request("PUT", "/conversations")
        #expect(wrongMethod.status == 405)

        // Revoked: DELETE /sessions/:token ends it; the token then answers 401 with a nonce.
        let token2 = alice.sessionToken!
        let ended = try await alice.request("DELETE", "/sessions/\(token2)")
        #expect(ended.status == 204)
        let revoked = try await alice.request("GET", "/conversations")
        #expect(revoked.status == 401)
        #expect((revoked.object["data"] as? [String: Any])?["reason"] as? String == "session-revoked")
        #expect(((revoked.object["data"] as? [String: Any])?["nonce"] as? String)?.isEmpty == false)
        alice.sessionToken = nil
        await node.stop()
    }

    @Test func anExpiredSessionAnswers401WithANonce() async throws {
        let node = try await TestNode.start("capi-expired")
        // A session whose time ran out (stored as the node stores sessions).
        let token = "an-expired-session-token"
        let now = Timestamp.now()
        let record = SessionRecord(
            tokenHash: try SHA256Hasher.hash(Array(token.utf8)), user: "alice", device: UUID().uuidString.lowercased(),
            createdAt: Timestamp(millisecondsSince1970: now.millisecondsSince1970 - 120_000),
            expiresAt: Timestamp(millisecondsSince1970: now.millisecondsSince1970 - 60_000))
        try await node.server.store.write { tx in try tx.createSession(record) }
        var alice = ClientAPICurl(node, http: .http2)
        alice.sessionToken = token
        let refused = try await alice.request("GET", "/conversations")
        #expect(refused.status == 401)
        #expect((refused.object["data"] as? [String: Any])?["reason"] as? String == "session-expired")
        #expect(((refused.object["data"] as? [String: Any])?["nonce"] as? String)?.isEmpty == false)
        await node.stop()
    }

    @Test func devIdentityTokensAreServedOnlyWithTheDevProvider() async throws {
        let node = try await TestNode.start("capi-dev")
        let client = ClientAPICurl(node, http: .http1)
        let nonce = try await client.request("POST", "/nonces").object["nonce"] as? String ?? ""
        let minted = try await client.request(
            "POST", "/dev/identity_tokens", json: #"{"user_id":"web-user","nonce":"\#(nonce)"}"#)
        #expect(minted.status == 201)
        let token = minted.object["identity_token"] as? String ?? ""
        let appID = node.server.serverAPICredentials!.appID
        let login = try await client.request(
            "POST", "/sessions", json: #"{"identity_token":"\#(token)","app_id":"\#(appID)"}"#)
        #expect(login.status == 201)
        let long = String(repeating: "u", count: Limits.maxUserIDBytes + 1)
        let tooLong = try await client.request(
            "POST", "/dev/identity_tokens", json: #"{"user_id":"\#(long)","nonce":"\#(nonce)"}"#)
        #expect(tooLong.status == 422)
        await node.stop()

        let closed = try await TestNode.start("capi-nodev") { $0.devIdentityProvider = false }
        let refused = try await ClientAPICurl(closed, http: .http1).request(
            "POST", "/dev/identity_tokens", json: #"{"user_id":"web-user","nonce":"n"}"#)
        #expect(refused.status == 404)
        await closed.stop()
    }

    @Test func pagingReceiptsLeavingConflictsIdentitiesAndAnnouncements() async throws {
        let node = try await TestNode.start("capi-more")
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http2)
        let bob = try await ClientAPICurl.session("bob", on: node, http: .http1)

        // Three conversations; pages of two, newest first, after from_id.
        var ids: [String] = []
        for title in ["a", "b", "c"] {
            let created = try await alice.request(
                "POST", "/conversations",
                json: #"{"participants":["bob"],"distinct":false,"metadata":{"title":"\#(title)"}}"#)
            #expect(created.status == 201)
            ids.append(created.object["id"] as? String ?? "")
        }
        let first = try await alice.request("GET", "/conversations?page_size=2")
        #expect(first.headers["layer-count"] == "3")
        #expect(first.array.compactMap { $0["id"] as? String } == [ids[2], ids[1]])
        let second = try await alice.request("GET", "/conversations?page_size=2&from_id=\(ids[1])")
        #expect(second.array.compactMap { $0["id"] as? String } == [ids[0]])
        let tooBig = try await alice.request("GET", "/conversations?page_size=101")
        #expect(tooBig.status == 422)

        // A distinct conversation that exists with other metadata: 409 conflict carrying it.
        let distinct = try await alice.request(
            "POST", "/conversations", json: #"{"participants":["bob"],"metadata":{"title":"one"}}"#)
        #expect(distinct.status == 201)
        let clash = try await bob.request(
            "POST", "/conversations", json: #"{"participants":["alice"],"metadata":{"title":"two"}}"#)
        #expect(clash.status == 409)
        #expect(clash.object["id"] as? String == "conflict")
        #expect((clash.object["data"] as? [String: Any])?["id"] as? String == distinct.object["id"] as? String)
        #expect(((clash.object["data"] as? [String: Any])?["metadata"] as? [String: Any])?["title"] as? String == "one")
        // An id in use by a conversation with other participants: 409 id_in_use carrying it.
        let taken = try await alice.request(
            "POST", "/conversations", json: #"{"id":"\#(ids[0])","participants":["carol"]}"#)
        #expect(taken.status == 409)
        #expect(taken.object["id"] as? String == "id_in_use")
        #expect((taken.object["data"] as? [String: Any])?["id"] as? String == ids[0])

        // Delivery, then mark-all-read up to a position.
        let conversation = ids[0].replacingOccurrences(of: "layer:///conversations/", with: "")
        var sent: [[String: Any]] = []
        for text in ["one", "two"] {
            let message = try await alice.request(
                "POST", "/conversations/\(conversation)/messages",
                json: #"{"parts":[{"mime_type":"text/plain","body":"\#(text)"}]}"#)
            #expect(message.status == 201)
            sent.append(message.object)
        }
        let firstMessage = (sent[0]["id"] as? String ?? "").replacingOccurrences(of: "layer:///messages/", with: "")
        let delivered = try await bob.request(
            "POST", "/messages/\(firstMessage)/receipts", json: #"{"type":"delivery"}"#)
        #expect(delivered.status == 204)
        let status = try await alice.request("GET", "/messages/\(firstMessage)")
        #expect((status.object["recipient_status"] as? [String: String])?["layer:///identities/bob"] == "delivered")
        let badReceipt = try await bob.request("POST", "/messages/\(firstMessage)/receipts", json: #"{"type":"seen"}"#)
        #expect(badReceipt.status == 422)
        let position = sent[0]["position"] as? Int ?? 0
        let marked = try await bob.request(
            "POST", "/conversations/\(conversation)/mark_all_read", json: #"{"position":\#(position)}"#)
        #expect(marked.status == 204)
        let bobsMessages = try await bob.request("GET", "/conversations/\(conversation)/messages")
        #expect(bobsMessages.array.map { $0["is_unread"] as? Bool } == [true, false])
        let older = try await bob.request(
            "GET", "/conversations/\(conversation)/messages?from_id=\(sent[1]["id"] as? String ?? "")")
        #expect(older.array.compactMap { $0["id"] as? String } == [sent[0]["id"] as? String ?? ""])

        // Bob leaves: deleted from his devices and no longer a participant.
        let left = try await bob.request("DELETE", "/conversations/\(conversation)?mode=my_devices&leave=true")
        #expect(left.status == 204)
        let after = try await alice.request("GET", "/conversations/\(conversation)")
        #expect(
            (after.object["participants"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == ["alice"])
        let gone = try await bob.request("GET", "/conversations/\(conversation)")
        #expect(gone.status == 404)
        let noMode = try await alice.request("DELETE", "/conversations/\(conversation)")
        #expect(noMode.status == 422)

        // Identities: what the Server API set; announcements the Server API sent.
        let server = CurlAPI(node.server, http: .http1)
        let identity = try await server.request("POST", "/users/bob/identity", json: #"{"display_name":"Bob B."}"#)
        #expect(identity.status == 201)
        let shown = try await alice.request("GET", "/identities/bob")
        #expect(shown.object["display_name"] as? String == "Bob B.")
        #expect(shown.object["id"] as? String == "layer:///identities/bob")
        let followed = try await alice.request("GET", "/identities")
        #expect(followed.headers["layer-count"] == "1")
        #expect(followed.array.compactMap { $0["display_name"] as? String } == ["Bob B."])
        let announced = try await server.request(
            "POST", "/announcements",
            json:
                #"{"recipients":["alice"],"sender":{"name":"Admin"},"parts":[{"mime_type":"text/plain","body":"news"}]}"#
        )
        #expect(announced.status == 202)
        let announcements = try await alice.request("GET", "/announcements")
        #expect(announcements.headers["layer-count"] == "1")
        let announcement = announcements.array.first ?? [:]
        #expect((announcement["sender"] as? [String: Any])?["name"] as? String == "Admin")
        #expect((announcement["id"] as? String)?.hasPrefix("layer:///announcements/") == true)
        let announcementID = (announcement["id"] as? String ?? "").replacingOccurrences(
            of: "layer:///announcements/", with: "")
        #expect(try await alice.request("GET", "/announcements/\(announcementID)").status == 200)
        #expect(try await bob.request("GET", "/announcements/\(announcementID)").status == 404)
        #expect(try await alice.request("DELETE", "/announcements/\(announcementID)").status == 204)
        // (`my_devices` deletions are feed events the user's devices apply; the node keeps no
        // per-user hidden set, so REST lists still show the announcement: CLIENT-API.md.)
        // The announcements conversation is not among alice's conversations.
        #expect(try await alice.request("GET", "/conversations").headers["layer-count"] == "4")

        // Push tokens: this node delivers no pushes (no provider configured).
        let push = try await alice.request(
            "POST", "/push_tokens", json: #"{"token":"dGVzdA","type":"fcm","device_id":"d1"}"#)
        #expect(push.status == 422)
        #expect((push.object["data"] as? [String: Any])?["property"] as? String == "type")
        await node.stop()
    }

    @Test func restAndSDKClientsExchangeMessagesBothWays() async throws {
        let node = try await TestNode.start("capi-interop")
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http2)
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)

        let created = try await alice.request("POST", "/conversations", json: #"{"participants":["bob"]}"#)
        #expect(created.status == 201)
        let uuid = Self.uuid(created.object, "layer:///conversations/")
        let conversation = ConversationID(uuid: UUID(uuidString: uuid)!)
        let sent = try await alice.request(
            "POST", "/conversations/\(uuid)/messages",
            json: #"{"parts":[{"mime_type":"text/plain","body":"from REST"}]}"#)
        #expect(sent.status == 201)
        let restMessage = MessageID(uuid: UUID(uuidString: Self.uuid(sent.object, "layer:///messages/"))!)
        // Live at the SDK client.
        try await ClientHarness.waitUntil(bob, "the REST message at bob") { try bob.message(restMessage) != nil }
        #expect(try bob.message(restMessage)?.message.parts.first?.inlineBytes == Array("from REST".utf8))

        // Bob answers through the SDK; alice lists it over REST.
        let reply = try bob.send(bob.newMessage(parts: [MessagePart.with(text: "from the SDK")]), in: conversation).id
        let deadline = ContinuousClock.now + .seconds(30)
        var listed: [[String: Any]] = []
        while ContinuousClock.now < deadline {
            listed = try await alice.request("GET", "/conversations/\(uuid)/messages").array
            if listed.contains(where: { $0["id"] as? String == ClientAPIRepresentation.messageID(reply) }) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(listed.first?["id"] as? String == ClientAPIRepresentation.messageID(reply))
        #expect((listed.first?["parts"] as? [[String: Any]])?.first?["body"] as? String == "from the SDK")
        #expect((listed.first?["sender"] as? [String: Any])?["user_id"] as? String == "bob")
        try await bob.close()
        await node.stop()
    }
}
