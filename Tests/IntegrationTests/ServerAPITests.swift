import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// The Server API (Layer's Platform API) on a real node, through curl over HTTP/1.1 and
/// HTTP/2 and Python's standard library over HTTP/1.1.
@Suite struct ServerAPITests {
    static func conversationUUID(_ object: [String: Any]) -> String {
        (object["id"] as? String ?? "").replacingOccurrences(of: "layer:///conversations/", with: "")
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func conversationsAreCreatedDistinctlyReadListedPatchedAndDeleted(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-conv-\(http == .http1 ? "h1" : "h2")")
        let api = CurlAPI(node.server, http: http)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","bob"],"metadata":{"title":"T"}}"#)
        #expect(created.status == 201)
        #expect(created.httpVersion == (http == .http1 ? "1.1" : "2"))
        let id = Self.conversationUUID(created.object)
        #expect(created.headers["location"]?.hasSuffix("/conversations/\(id)") == true)
        #expect(
            (created.object["participants"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == [
                "alice", "bob",
            ])

        // The same distinct participants: the existing one, 200; other metadata: 409 conflict.
        let again = try await api.request("POST", "/conversations", json: #"{"participants":["bob","alice"]}"#)
        #expect(again.status == 200)
        #expect(Self.conversationUUID(again.object) == id)
        let clash = try await api.request(
            "POST", "/conversations", json: #"{"participants":["bob","alice"],"metadata":{"title":"X"}}"#)
        #expect(clash.status == 409)
        #expect(clash.object["id"] as? String == "conflict")
        #expect((clash.object["data"] as? [String: Any])?["id"] as? String == "layer:///conversations/\(id)")

        let got = try await api.request("GET", "/conversations/\(id)")
        #expect(got.status == 200)
        #expect((got.object["metadata"] as? [String: Any])?["title"] as? String == "T")

        // PATCH: several operations, applied together.
        let patch =
            #"[{"operation":"add","property":"participants","value":"carol"},{"operation":"set","property":"metadata.color.background","value":"red"},{"operation":"delete","property":"metadata.title"}]"#
        let patched = try await api.request(
            "PATCH", "/conversations/\(id)", json: patch, contentType: "application/vnd.layer-patch+json")
        #expect(patched.status == 204)
        let after = try await api.request("GET", "/conversations/\(id)")
        #expect(
            (after.object["participants"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == [
                "alice", "bob", "carol",
            ])
        #expect(after.object["metadata"] as? [String: [String: String]] == ["color": ["background": "red"]])

        // All or nothing: a bad operation after a good one changes nothing.
        let bad =
            #"[{"operation":"add","property":"participants","value":"dave"},{"operation":"frobnicate","property":"participants","value":"x"}]"#
        let refused = try await api.request(
            "PATCH", "/conversations/\(id)", json: bad, contentType: "application/vnd.layer-patch+json")
        #expect(refused.status == 422)
        #expect(refused.object["id"] as? String == "invalid_property")
        let tooMany =
            "["
            + (1...30).map { #"{"operation":"add","property":"participants","value":"u\#($0)"}"# }.joined(
                separator: ",") + "]"
        let overLimit = try await api.request(
            "PATCH", "/conversations/\(id)", json: tooMany, contentType: "application/vnd.layer-patch+json")
        #expect(overLimit.status == 422)
        let unchanged = try await api.request("GET", "/conversations/\(id)")
        #expect((unchanged.object["participants"] as? [Any])?.count == 3)
        let wrongType = try await api.request("PATCH", "/conversations/\(id)", json: patch)
        #expect(wrongType.status == 415)
        #expect(wrongType.object["id"] as? String == "invalid_header")

        // A user's conversations, newest first, paged.
        let second = try await api.request(
            "POST", "/conversations", json: #"{"participants":["carol","dave"],"distinct":false}"#)
        #expect(second.status == 201)
        let listed = try await api.request("GET", "/users/carol/conversations")
        #expect(listed.status == 200)
        #expect(listed.array.map(Self.conversationUUID) == [Self.conversationUUID(second.object), id])
        let paged = try await api.request(
            "GET", "/users/carol/conversations?page_size=1&from_id=\(Self.conversationUUID(second.object))")
        #expect(paged.array.map(Self.conversationUUID) == [id])

        let deleted = try await api.request("DELETE", "/conversations/\(id)")
        #expect(deleted.status == 204)
        let gone = try await api.request("GET", "/conversations/\(id)")
        #expect(gone.status == 410)
        #expect(gone.object["id"] as? String == "object_deleted")
        #expect(gone.object["code"] as? Int == 103)
        await node.stop()
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func identitiesAreSetReadPatchedShownAndDeleted(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-identity-\(http == .http1 ? "h1" : "h2")")
        let api = CurlAPI(node.server, http: http)
        #expect(try await api.request("GET", "/users/alice/identity").status == 404)
        let created = try await api.request(
            "POST", "/users/alice/identity",
            json:
                #"{"display_name":"Alice A.","avatar_url":"https://example.com/a.png","first_name":"Alice","metadata":{"team":"blue"}}"#
        )
        #expect(created.status == 201)
        #expect(created.object["display_name"] as? String == "Alice A.")
        #expect(created.object["id"] as? String == "layer:///identities/alice")
        let twice = try await api.request("POST", "/users/alice/identity", json: #"{"display_name":"again"}"#)
        #expect(twice.status == 409)

        let patch =
            #"[{"operation":"set","property":"last_name","value":"Archer"},{"operation":"delete","property":"avatar_url"},{"operation":"set","property":"metadata.level","value":"3"}]"#
        #expect(
            try await api.request(
                "PATCH", "/users/alice/identity", json: patch, contentType: "application/vnd.layer-patch+json"
            ).status == 204)
        let got = try await api.request("GET", "/users/alice/identity")
        #expect(got.object["last_name"] as? String == "Archer")
        #expect(got.object["avatar_url"] is NSNull)
        #expect(got.object["metadata"] as? [String: String] == ["team": "blue", "level": "3"])

        // 3.0 shows the identity in conversations; 1.0 keeps the user id.
        let conversation = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let shown = (conversation.object["participants"] as? [[String: Any]])?.first {
            $0["user_id"] as? String == "alice"
        }
        #expect(shown?["display_name"] as? String == "Alice A.")
        #expect(
            (conversation.object["participants"] as? [[String: Any]])?.first { $0["user_id"] as? String == "bob" }?[
                "display_name"] as? String == "bob")

        // Refusals: an unknown property, a value over its limit, a non-string metadata value.
        let unknown = try await api.request("PUT", "/users/alice/identity", json: #"{"nickname":"al"}"#)
        #expect(unknown.status == 422)
        #expect((unknown.object["data"] as? [String: Any])?["property"] as? String == "nickname")
        let long = try await api.request(
            "PUT", "/users/alice/identity", json: #"{"display_name":"\#(String(repeating: "a", count: 1_025))"}"#)
        #expect(long.status == 422)
        let number = try await api.request("PUT", "/users/alice/identity", json: #"{"metadata":{"level":3}}"#)
        #expect(number.status == 422)
        #expect(try await api.request("GET", "/users/alice/identity").object["last_name"] as? String == "Archer")

        #expect(try await api.request("PUT", "/users/alice/identity", json: #"{"display_name":"Al"}"#).status == 204)
        let replaced = try await api.request("GET", "/users/alice/identity")
        #expect(replaced.object["display_name"] as? String == "Al")
        #expect(replaced.object["last_name"] == nil)
        #expect(try await api.request("DELETE", "/users/alice/identity").status == 204)
        #expect(try await api.request("DELETE", "/users/alice/identity").status == 404)
        await node.stop()
    }

    @Test func revokingAUsersSessionsEndsItsOpenStreams() async throws {
        let node = try await TestNode.start("api-sessions")
        let api = CurlAPI(node.server, http: .http1)
        let alice = try await node.session("alice", device: UUID())
        let bob = try await node.session("bob", device: UUID())
        #expect(try await api.request("DELETE", "/users/alice/sessions").status == 204)
        let frames = try await alice.framesUntilEnd()
        guard case .error(let error)? = frames.last else {
            Issue.record("alice's stream did not end with an ERROR: \(frames)")
            return
        }
        #expect(error.code == .sessionRevoked && error.isFatal)
        // Bob is untouched.
        let conversation = try await MessagingTests.conversation(bob, with: ["bob", "carol"])
        _ = try await MessagingTests.send(bob, conversation, "still here")
        await bob.close()
        await node.stop()
    }

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func messagesAreSentListedAsSystemAndUserAndDeleted(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-msg-\(http == .http1 ? "h1" : "h2")")
        let v1 = CurlAPI(node.server, http: http, version: "1.0")
        let v3 = CurlAPI(node.server, http: http, version: "3.0")
        let created = try await v1.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let id = Self.conversationUUID(created.object)
        #expect(created.object["participants"] as? [String] == ["alice", "bob"])

        let sent = try await v1.request(
            "POST", "/conversations/\(id)/messages",
            json: """
                {"sender":{"user_id":"alice"},"parts":[{"body":"hello bob","mime_type":"text/plain"},
                 {"body":"AAEC","mime_type":"application/octet-stream","encoding":"base64"}],"notification":{"text":"alice: hello","sound":"chime"}}
                """)
        #expect(sent.status == 201)
        let messageID = (sent.object["id"] as? String ?? "").replacingOccurrences(of: "layer:///messages/", with: "")
        #expect((sent.object["sender"] as? [String: Any])?["user_id"] as? String == "alice")
        let parts = sent.object["parts"] as? [[String: Any]] ?? []
        #expect(parts.first?["body"] as? String == "hello bob")
        #expect(parts.last?["encoding"] as? String == "base64")
        #expect(parts.last?["body"] as? String == "AAEC")

        let sent3 = try await v3.request(
            "POST", "/conversations/\(id)/messages",
            json: #"{"sender_id":"layer:///identities/bob","parts":[{"body":"hi alice","mime_type":"text/plain"}]}"#)
        #expect(sent3.status == 201)
        #expect((sent3.object["sender"] as? [String: Any])?["id"] as? String == "layer:///identities/bob")
        #expect(((sent3.object["parts"] as? [[String: Any]])?.first?["id"] as? String)?.contains("/parts/") == true)

        let system = try await v1.request("GET", "/conversations/\(id)/messages")
        #expect(system.status == 200)
        #expect(
            system.array.compactMap { ($0["parts"] as? [[String: Any]])?.first?["body"] as? String } == [
                "hi alice", "hello bob",
            ])
        let asBob = try await v1.request("GET", "/users/bob/conversations/\(id)/messages?page_size=10")
        #expect(asBob.array.map { $0["is_unread"] as? Bool } == [false, true])
        let one = try await v1.request("GET", "/conversations/\(id)/messages/\(messageID)")
        #expect(one.status == 200)
        #expect((one.object["recipient_status"] as? [String: String])?["alice"] == "read")

        // Refusals: not a participant, over 2 KB inline, no parts.
        let outsider = try await v1.request(
            "POST", "/conversations/\(id)/messages",
            json: #"{"sender":{"user_id":"mallory"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#)
        #expect(outsider.status == 403)
        #expect(outsider.object["id"] as? String == "access_denied")
        let big = String(repeating: "x", count: 2049)
        let tooBig = try await v1.request(
            "POST", "/conversations/\(id)/messages",
            json: #"{"sender":{"user_id":"alice"},"parts":[{"body":"\#(big)","mime_type":"text/plain"}]}"#)
        #expect(tooBig.status == 422)
        #expect((tooBig.object["data"] as? [String: Any])?["property"] as? String == "parts[0]")
        let noParts = try await v1.request(
            "POST", "/conversations/\(id)/messages", json: #"{"sender":{"user_id":"alice"}}"#)
        #expect(noParts.status == 422)
        #expect(noParts.object["id"] as? String == "missing_property")
        #expect(noParts.object["code"] as? Int == 104)

        // Bob reads everything: no unread left for him, alice's message shows read by bob.
        let marked = try await v1.request("POST", "/users/bob/conversations/\(id)/mark_all_read")
        #expect(marked.status == 204)
        let readByBob = try await v1.request("GET", "/users/bob/conversations/\(id)/messages")
        #expect(readByBob.array.map { $0["is_unread"] as? Bool } == [false, false])
        #expect((readByBob.array.last?["recipient_status"] as? [String: String])?["bob"] == "read")
        let outsiderMarks = try await v1.request("POST", "/users/mallory/conversations/\(id)/mark_all_read")
        #expect(outsiderMarks.status == 403)

        let deleted = try await v1.request("DELETE", "/conversations/\(id)/messages/\(messageID)")
        #expect(deleted.status == 204)
        let gone = try await v1.request("GET", "/conversations/\(id)/messages/\(messageID)")
        #expect(gone.status == 410)
        let left = try await v1.request("GET", "/conversations/\(id)/messages")
        #expect(left.array.count == 1)
        await node.stop()
    }

    /// A message from a named system sender (`sender.name`, 1.0 and 3.0): shown with its name
    /// and no user id, in no participant's recipient status, unread for every participant.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func systemMessagesComeFromANamedSender(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-sys-\(http == .http1 ? "h1" : "h2")")
        let v1 = CurlAPI(node.server, http: http, version: "1.0")
        let v3 = CurlAPI(node.server, http: http, version: "3.0")
        let created = try await v1.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let id = Self.conversationUUID(created.object)

        let sent = try await v1.request(
            "POST", "/conversations/\(id)/messages",
            json: #"{"sender":{"name":"Admin"},"parts":[{"body":"maintenance at noon","mime_type":"text/plain"}]}"#)
        #expect(sent.status == 201, "\(sent.body)")
        let sender = sent.object["sender"] as? [String: Any] ?? [:]
        #expect(sender["name"] as? String == "Admin")
        #expect(sender["user_id"] is NSNull)
        #expect(sent.object["recipient_status"] as? [String: String] == ["alice": "sent", "bob": "sent"])
        let sent3 = try await v3.request(
            "POST", "/conversations/\(id)/messages",
            json: #"{"sender":{"name":"Billing"},"parts":[{"body":"invoice ready","mime_type":"text/plain"}]}"#)
        #expect(sent3.status == 201, "\(sent3.body)")
        let sender3 = sent3.object["sender"] as? [String: Any] ?? [:]
        #expect(sender3["name"] as? String == "Billing")
        #expect(sender3["id"] is NSNull)

        let asAlice = try await v3.request("GET", "/users/alice/conversations/\(id)/messages")
        #expect(asAlice.array.map { $0["is_unread"] as? Bool } == [true, true])
        #expect(asAlice.array.map { ($0["sender"] as? [String: Any])?["name"] as? String } == ["Billing", "Admin"])

        // Refusals: both forms, a bad name, the reserved form as a user.
        let longName = String(repeating: "n", count: 241)
        for (body, property) in [
            (
                #"{"sender":{"user_id":"alice","name":"Admin"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#,
                "sender"
            ),
            (#"{"sender":{"name":""},"parts":[{"body":"x","mime_type":"text/plain"}]}"#, "sender.name"),
            (#"{"sender":{"name":7},"parts":[{"body":"x","mime_type":"text/plain"}]}"#, "sender.name"),
            (#"{"sender":{"name":"\#(longName)"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#, "sender.name"),
            (
                #"{"sender":{"user_id":"layer:///system/Admin"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#,
                "sender.user_id"
            ),
        ] {
            let refused = try await v1.request("POST", "/conversations/\(id)/messages", json: body)
            #expect(refused.status == 422, "\(body)")
            #expect((refused.object["data"] as? [String: Any])?["property"] as? String == property, "\(body)")
        }
        let reservedParticipant = try await v1.request(
            "POST", "/conversations", json: #"{"participants":["alice","layer:///system/Admin"]}"#)
        #expect(reservedParticipant.status == 422)
        #expect(reservedParticipant.object["id"] as? String == "invalid_property")
        let unknown = try await v1.request(
            "POST", "/conversations/\(UUID().uuidString)/messages",
            json: #"{"sender":{"name":"Admin"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#)
        #expect(unknown.status == 404)
        await node.stop()
    }

    /// An announcement reaches each recipient as a message from the system sender in their own
    /// announcements conversation (created the first time, reused after); a repeat with the
    /// same If-None-Match delivers nothing twice; bad input is refused before any delivery.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func announcementsReachEachRecipientsAnnouncementsConversation(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-ann-\(http == .http1 ? "h1" : "h2")")
        let v1 = CurlAPI(node.server, http: http, version: "1.0")
        let v3 = CurlAPI(node.server, http: http, version: "3.0")
        let body =
            #"{"recipients":["alice","bob","alice"],"sender":{"name":"The System"},"parts":[{"body":"welcome","mime_type":"text/plain"}],"notification":{"text":"welcome"}}"#
        let requestID = UUID().uuidString
        let sent = try await v1.request(
            "POST", "/announcements", json: body,
            headers: [
                "Authorization": "Bearer \(v1.token)", "Accept": "application/vnd.layer+json; version=1.0",
                "If-None-Match": requestID,
            ])
        #expect(sent.status == 202, "\(sent.body)")
        #expect(sent.object["recipients"] as? [String] == ["alice", "bob"])
        #expect((sent.object["sender"] as? [String: Any])?["name"] as? String == "The System")
        #expect((sent.object["id"] as? String)?.hasPrefix("layer:///announcements/") == true)
        let repeated = try await v1.request(
            "POST", "/announcements", json: body,
            headers: [
                "Authorization": "Bearer \(v1.token)", "Accept": "application/vnd.layer+json; version=1.0",
                "If-None-Match": requestID,
            ])
        #expect(repeated.status == 202)
        let second = try await v3.request(
            "POST", "/announcements",
            json:
                #"{"recipients":["layer:///identities/alice"],"sender":{"name":"The System"},"parts":[{"body":"second","mime_type":"text/plain"}]}"#
        )
        #expect(second.status == 202, "\(second.body)")
        #expect(second.object["recipients"] as? [String] == ["layer:///identities/alice"])

        // Alice has one announcements conversation, only hers, with both announcements, unread.
        let conversations = try await v1.request("GET", "/users/alice/conversations")
        #expect(conversations.array.count == 1)
        let conversation = conversations.array.first ?? [:]
        #expect(conversation["participants"] as? [String] == ["alice"])
        #expect((conversation["metadata"] as? [String: Any])?["lamina_announcements"] as? String == "true")
        let id = Self.conversationUUID(conversation)
        let messages = try await v1.request("GET", "/users/alice/conversations/\(id)/messages")
        #expect(
            messages.array.compactMap { ($0["parts"] as? [[String: Any]])?.first?["body"] as? String } == [
                "second", "welcome",
            ])
        #expect(
            messages.array.map { ($0["sender"] as? [String: Any])?["name"] as? String } == ["The System", "The System"])
        #expect(messages.array.map { $0["is_unread"] as? Bool } == [true, true])
        let bobs = try await v1.request("GET", "/users/bob/conversations")
        #expect(bobs.array.count == 1)
        #expect(Self.conversationUUID(bobs.array.first ?? [:]) != id)

        // Refusals, each before anything is delivered: carol gets nothing.
        for (refused, property) in [
            (#"{"sender":{"name":"S"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#, "recipients"),
            (#"{"recipients":[],"sender":{"name":"S"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#, "recipients"),
            (
                #"{"recipients":["carol"],"sender":{"user_id":"alice"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#,
                "sender"
            ),
            (#"{"recipients":["carol"],"sender":{"name":"S"}}"#, "parts"),
            (
                #"{"recipients":["carol"],"sender":{"name":"S"},"parts":[{"body":"\#(String(repeating: "x", count: 2049))","mime_type":"text/plain"}]}"#,
                "parts[0]"
            ),
        ] {
            let answer = try await v1.request("POST", "/announcements", json: refused)
            #expect(answer.status == 422, "\(refused)")
            #expect(
                (answer.object["data"] as? [String: Any])?["property"] as? String == property,
                "\(refused): \(answer.body)")
        }
        let many =
            "[" + (0...ServerAPILimits.maxAnnouncementRecipients).map { "\"u\($0)\"" }.joined(separator: ",") + "]"
        let tooMany = try await v1.request(
            "POST", "/announcements",
            json: #"{"recipients":\#(many),"sender":{"name":"S"},"parts":[{"body":"x","mime_type":"text/plain"}]}"#)
        #expect(tooMany.status == 422)
        #expect(try await v1.request("GET", "/users/carol/conversations").array.isEmpty)
        await node.stop()
    }

    /// Block lists: listed, added (twice is fine), removed; bad input refused.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func blockListsAreListedAddedAndRemoved(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-blocks-\(http == .http1 ? "h1" : "h2")")
        let v1 = CurlAPI(node.server, http: http, version: "1.0")
        let v3 = CurlAPI(node.server, http: http, version: "3.0")
        #expect(try await v1.request("GET", "/users/bob/blocks").array.isEmpty)
        #expect(try await v1.request("POST", "/users/bob/blocks", json: #"{"user_id":"mallory"}"#).status == 204)
        #expect(try await v1.request("POST", "/users/bob/blocks", json: #"{"user_id":"mallory"}"#).status == 204)
        #expect(
            try await v3.request("POST", "/users/bob/blocks", json: #"{"user_id":"layer:///identities/eve"}"#).status
                == 204)
        let listed = try await v1.request("GET", "/users/bob/blocks")
        #expect(listed.status == 200)
        #expect(listed.array.map { $0["user_id"] as? String } == ["eve", "mallory"])
        #expect(
            try await v3.request("GET", "/users/bob/blocks").array.map { $0["id"] as? String } == [
                "layer:///identities/eve", "layer:///identities/mallory",
            ])
        #expect(try await v1.request("GET", "/users/mallory/blocks").array.isEmpty)

        #expect(try await v1.request("DELETE", "/users/bob/blocks/eve").status == 204)
        // Unblocking a user who is not blocked: 204, as Layer answered.
        #expect(try await v1.request("DELETE", "/users/bob/blocks/eve").status == 204)
        #expect(try await v1.request("GET", "/users/bob/blocks").array.map { $0["user_id"] as? String } == ["mallory"])
        // Blocking oneself: accepted, changes nothing.
        #expect(try await v1.request("POST", "/users/bob/blocks", json: #"{"user_id":"bob"}"#).status == 204)
        #expect(try await v1.request("GET", "/users/bob/blocks").array.map { $0["user_id"] as? String } == ["mallory"])

        for (body, id) in [
            (#"{}"#, "missing_property"), (#"{"user_id":7}"#, "invalid_property"),
            (#"{"user_id":"layer:///system/Admin"}"#, "invalid_property"),
        ] {
            let refused = try await v1.request("POST", "/users/bob/blocks", json: body)
            #expect(refused.status == 422, "\(body)")
            #expect(refused.object["id"] as? String == id, "\(body)")
        }
        await node.stop()
    }

    /// A blocked user's messages do not reach the blocker's device; others' do, and after
    /// unblocking theirs do again.
    @Test func aBlockedUsersMessagesDoNotReachTheBlocker() async throws {
        let node = try await TestNode.start("api-blocks-e2e")
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let api = CurlAPI(node.server, http: .http2, version: "1.0")
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","bob","carol"]}"#)
        let id = Self.conversationUUID(created.object)
        func send(_ sender: String, _ text: String) async throws -> MessageID {
            let sent = try await api.request(
                "POST", "/conversations/\(id)/messages",
                json: #"{"sender":{"user_id":"\#(sender)"},"parts":[{"body":"\#(text)","mime_type":"text/plain"}]}"#)
            #expect(sent.status == 201)
            return MessageID(
                uuid: UUID(
                    uuidString: (sent.object["id"] as? String ?? "").replacingOccurrences(
                        of: "layer:///messages/", with: ""))!)
        }
        #expect(try await api.request("POST", "/users/bob/blocks", json: #"{"user_id":"alice"}"#).status == 204)
        let blocked = try await send("alice", "you will not see this")
        let fromCarol = try await send("carol", "but this")
        // Bob's feed is in order: had alice's message reached him, it would be there before carol's.
        _ = try await bob.waitForCreation(of: fromCarol, timeout: .seconds(30))
        #expect(try bob.messages(in: ConversationID(uuid: UUID(uuidString: id)!)).map(\.message.id) == [fromCarol])
        #expect(
            !(try bob.messages(in: ConversationID(uuid: UUID(uuidString: id)!)).contains { $0.message.id == blocked }))

        #expect(try await api.request("DELETE", "/users/bob/blocks/alice").status == 204)
        let again = try await send("alice", "unblocked")
        let seen = try await bob.waitForCreation(of: again, timeout: .seconds(30))
        #expect(seen.message.sender == "alice")
        try await bob.close()
        await node.stop()
    }

    /// A badge: the external unread count set by PUT beside the node's unread counts.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func badgesShowTheExternalAndTheNodesUnreadCounts(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-badge-\(http == .http1 ? "h1" : "h2")")
        let api = CurlAPI(node.server, http: http, version: "1.0")
        func badge(_ user: String) async throws -> [String: Int] {
            let answer = try await api.request("GET", "/users/\(user)/badge")
            #expect(answer.status == 200)
            return answer.object.compactMapValues { $0 as? Int }
        }
        #expect(
            try await badge("bob") == [
                "external_unread_count": 0, "unread_conversation_count": 0, "unread_message_count": 0,
            ])
        #expect(try await api.request("PUT", "/users/bob/badge", json: #"{"external_unread_count":5}"#).status == 204)
        for c in 0..<2 {
            let created = try await api.request(
                "POST", "/conversations", json: #"{"participants":["alice","bob"],"distinct":false}"#)
            let id = Self.conversationUUID(created.object)
            for i in 0...c {
                let sent = try await api.request(
                    "POST", "/conversations/\(id)/messages",
                    json: #"{"sender":{"user_id":"alice"},"parts":[{"body":"\#(i)","mime_type":"text/plain"}]}"#)
                #expect(sent.status == 201)
            }
        }
        #expect(
            try await badge("bob") == [
                "external_unread_count": 5, "unread_conversation_count": 2, "unread_message_count": 3,
            ])
        #expect(
            try await badge("alice") == [
                "external_unread_count": 0, "unread_conversation_count": 0, "unread_message_count": 0,
            ])
        #expect(try await api.request("PUT", "/users/bob/badge", json: #"{"external_unread_count":0}"#).status == 204)
        #expect(try await badge("bob")["external_unread_count"] == 0)

        for body in [
            #"{}"#, #"{"external_unread_count":-1}"#, #"{"external_unread_count":1.5}"#,
            #"{"external_unread_count":true}"#,
            #"{"external_unread_count":"3"}"#, #"{"external_unread_count":1000001}"#,
        ] {
            let refused = try await api.request("PUT", "/users/bob/badge", json: body)
            #expect(refused.status == 422, "\(body)")
        }
        await node.stop()
    }

    /// Block lists survive a restart (the engine loads them from storage), and a blocked
    /// user's typing does not reach the blocker either.
    @Test func blocksHoldAfterARestartForMessagesAndTyping() async throws {
        let node = try await TestNode.start("api-blocks-restart")
        #expect(
            try await CurlAPI(node.server, http: .http1, version: "1.0").request(
                "POST", "/users/bob/blocks", json: #"{"user_id":"alice"}"#
            ).status == 204)
        try await node.restart()
        let alice = try await node.session("alice", device: UUID())
        let carol = try await node.session("carol", device: UUID())
        let bob = try await node.session("bob", device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: ["bob", "carol"])
        _ = try await MessagingTests.send(alice, conversation, "blocked")
        let (fromCarol, _) = try await MessagingTests.send(carol, conversation, "not blocked")
        // Bob's feed is in order: alice's message would come before carol's.
        let first = try await bob.change { if case .messageCreated = $0.event { true } else { false } }
        guard case .messageCreated(let seen) = first.event else {
            Issue.record("not a message")
            return
        }
        #expect(seen.id == fromCarol)

        alice.send(.typing(Typing(conversationID: conversation, state: .started)))
        // Carol sees alice typing: the relay ran, for bob too, in the same call, before what follows.
        _ = try await carol.change {
            $0.event == .typing(TypingChanged(conversationID: conversation, user: "alice", state: .started))
        }
        carol.send(.typing(Typing(conversationID: conversation, state: .started)))
        let typing = try await bob.change { if case .typing = $0.event { true } else { false } }
        #expect(typing.event == .typing(TypingChanged(conversationID: conversation, user: "carol", state: .started)))
        await alice.close()
        await bob.close()
        await carol.close()
        await node.stop()
    }

    @Test func headersTokensAndBadInputGetLayersErrors() async throws {
        let node = try await TestNode.start("api-errors")
        let api = CurlAPI(node.server)
        let token = api.token
        func expectError(_ r: CurlAPI.Response, _ status: Int, _ id: String, _ code: Int) {
            #expect(r.status == status, "\(r.body)")
            #expect(r.object["id"] as? String == id, "\(r.body)")
            #expect(r.object["code"] as? Int == code, "\(r.body)")
            #expect(r.object["message"] is String)
            #expect(r.object["url"] is String)
        }
        let accept = "application/vnd.layer+json; version=3.0"
        expectError(
            try await api.request("GET", "/users/a/conversations", headers: ["Accept": accept]), 401,
            "authentication_required", 4)
        expectError(
            try await api.request(
                "GET", "/users/a/conversations", headers: ["Accept": accept, "Authorization": "Bearer x\(token)"]),
            401, "authentication_required", 4)
        expectError(
            try await api.request("GET", "/users/a/conversations", headers: ["Authorization": "Bearer \(token)"]), 406,
            "invalid_header", 107)
        expectError(
            try await api.request(
                "GET", "/users/a/conversations",
                headers: ["Authorization": "Bearer \(token)", "Accept": "application/vnd.layer+json; version=4.0"]),
            406, "invalid_header", 107)
        expectError(
            try await api.request("GET", "//apps/00000000-0000-0000-0000-000000000000/users/a/conversations"), 404,
            "invalid_app_id", 2)
        expectError(try await api.request("GET", "/conversations/\(UUID().uuidString)"), 404, "not_found", 102)
        expectError(try await api.request("GET", "/nothing-here"), 404, "invalid_endpoint", 109)
        expectError(try await api.request("PUT", "/conversations"), 405, "method_not_allowed", 110)
        expectError(
            try await api.request("POST", "/conversations", json: "{\"participants\": [\"a\""), 400, "invalid_request",
            10)
        expectError(
            try await api.request("POST", "/conversations", json: #"{"distinct":true}"#), 422, "missing_property", 104)
        expectError(
            try await api.request("POST", "/conversations", json: #"{"participants":"alice"}"#), 422,
            "invalid_property", 105)
        expectError(
            try await api.request("POST", "/conversations", json: #"{"participants":[1,2]}"#), 422, "invalid_property",
            105)
        expectError(
            try await api.request("POST", "/conversations", json: #"{"participants":["a"],"metadata":{"n":5}}"#), 422,
            "invalid_property", 105)
        let crowd = (1...30).map { "\"u\($0)\"" }.joined(separator: ",")
        expectError(
            try await api.request("POST", "/conversations", json: #"{"participants":[\#(crowd)]}"#), 422,
            "invalid_property", 105)
        expectError(
            try await api.request(
                "POST", "/conversations", json: "{}",
                headers: [
                    "Authorization": "Bearer \(token)", "Accept": accept, "If-None-Match": "not-a-uuid",
                ]), 400, "invalid_header", 107)
        let file = Fixtures.temporaryDirectory("api-big").appendingPathComponent("body.json")
        try Data(
            #"{"participants":["a"],"pad":""#.utf8 + Data(repeating: 0x61, count: ServerAPILimits.maxBodyBytes)
                + Data(#""}"#.utf8)
        ).write(to: file)
        expectError(try await api.request("POST", "/conversations", bodyFile: file.path), 413, "request_too_large", 111)
        // The node still serves after all of it.
        #expect(try await api.request("POST", "/conversations", json: #"{"participants":["a","b"]}"#).status == 201)
        await node.stop()
    }

    /// Several tokens, each accepted; a line added to or deleted from the tokens file takes
    /// effect while the node runs, and stays so after a restart.
    @Test func tokensAreSeveralAndRevocable() async throws {
        let node = try await TestNode.start("api-tokens")
        let file = node.server.prepared.dataDirectory.appendingPathComponent("server-api/tokens")
        let first = CurlAPI(node.server).token
        // Edits of the tokens file take effect while the node runs (it looks once a second).
        try Data("# two tokens\n\(first)\nsecond-token-for-the-billing-backend\n".utf8).write(to: file)
        var api = CurlAPI(node.server, token: "second-token-for-the-billing-backend")
        try await ResourceLimitTests.eventuallyAsync("the added token to be accepted") {
            (try? await api.request("GET", "/users/a/conversations").status) == 200
        }
        api = CurlAPI(node.server)
        #expect(try await api.request("GET", "/users/a/conversations").status == 200)
        try Data("second-token-for-the-billing-backend\n".utf8).write(to: file)
        api = CurlAPI(node.server, token: first)
        try await ResourceLimitTests.eventuallyAsync("the deleted token to be refused") {
            (try? await api.request("GET", "/users/a/conversations").status) == 401
        }
        api = CurlAPI(node.server, token: "second-token-for-the-billing-backend")
        #expect(try await api.request("GET", "/users/a/conversations").status == 200)
        // And after a restart, the file as it is.
        try await node.restart()
        #expect(try await CurlAPI(node.server, token: first).request("GET", "/users/a/conversations").status == 401)
        api = CurlAPI(node.server, token: "second-token-for-the-billing-backend")
        #expect(try await api.request("GET", "/users/a/conversations").status == 200)
        await node.stop()
    }

    @Test func ifNoneMatchMakesCreatesAndSendsIdempotent() async throws {
        let node = try await TestNode.start("api-idem")
        let api = CurlAPI(node.server)
        let requestID = UUID().uuidString.lowercased()
        var headers = [
            "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
            "If-None-Match": requestID,
        ]
        let first = try await api.request(
            "POST", "/conversations", json: #"{"participants":["a","b"],"distinct":false}"#, headers: headers)
        let second = try await api.request(
            "POST", "/conversations", json: #"{"participants":["a","b"],"distinct":false}"#, headers: headers)
        #expect(first.status == 201)
        #expect(second.status == 201)
        #expect(Self.conversationUUID(first.object) == requestID)
        #expect(Self.conversationUUID(second.object) == requestID)
        let listed = try await api.request("GET", "/users/a/conversations")
        #expect(listed.array.count == 1)

        headers["If-None-Match"] = UUID().uuidString
        let body = #"{"sender_id":"a","parts":[{"body":"once","mime_type":"text/plain"}]}"#
        #expect(
            try await api.request("POST", "/conversations/\(requestID)/messages", json: body, headers: headers).status
                == 201)
        #expect(
            try await api.request("POST", "/conversations/\(requestID)/messages", json: body, headers: headers).status
                == 201)
        #expect(try await api.request("GET", "/conversations/\(requestID)/messages").array.count == 1)
        await node.stop()
    }

    @Test func aTokenOverItsRateGets429WithRetryAfter() async throws {
        let node = try await TestNode.start("api-rate") { c in
            c.serverAPI.requestsPerSecond = 0.01
            c.serverAPI.burst = 3
        }
        let api = CurlAPI(node.server, http: .http2)
        for _ in 0..<3 { #expect(try await api.request("GET", "/users/a/conversations").status == 200) }
        let limited = try await api.request("GET", "/users/a/conversations")
        #expect(limited.status == 429)
        #expect(limited.object["id"] as? String == "rate_limit_exceeded")
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
        await node.stop()
    }

    @Test func syncStaysHTTP2OnlyAndSaysSoOverHTTP1() async throws {
        let node = try await TestNode.start("api-sync-h1")
        let result = try await ExternalCommand.run(
            "/usr/bin/curl",
            [
                "-sS", "--http1.1", "--cacert", node.server.prepared.certificatePath, "-X", "POST", "-w",
                "\n%{http_code} %{http_version}",
                node.server.url + NodeServer.syncPath,
            ])
        #expect(result.stdout.contains("needs HTTP/2"))
        #expect(result.stdout.hasSuffix("505 1.1"))
        // And the sync stream still works over HTTP/2 on the same port.
        let client = try await node.connect()
        _ = try await client.hello()
        await node.stop()
    }

    /// Python's http.client: several requests on one kept-alive HTTP/1.1 connection.
    @Test func pythonHTTPClientKeepsOneConnectionAlive() async throws {
        let node = try await TestNode.start("api-python")
        let api = CurlAPI(node.server)
        let script = """
            import http.client, json, ssl, sys
            ctx = ssl.create_default_context(cafile=sys.argv[1])
            host, port = sys.argv[2].rsplit(":", 1)
            conn = http.client.HTTPSConnection(host, int(port), context=ctx)
            h = {"Authorization": "Bearer " + sys.argv[4], "Accept": "application/vnd.layer+json; version=1.0",
                 "Content-Type": "application/json"}
            base = "/apps/" + sys.argv[3]
            conn.request("POST", base + "/conversations", json.dumps({"participants": ["alice", "bob"]}), h)
            r = conn.getresponse(); created = json.loads(r.read()); print(r.status, r.version)
            sock = conn.sock
            cid = created["id"].split("/")[-1]
            conn.request("POST", base + "/conversations/" + cid + "/messages",
                         json.dumps({"sender": {"user_id": "bob"}, "parts": [{"body": "from python", "mime_type": "text/plain"}]}), h)
            r = conn.getresponse(); r.read(); print(r.status)
            conn.request("GET", base + "/conversations/" + cid + "/messages", headers=h)
            r = conn.getresponse(); msgs = json.loads(r.read()); print(r.status, msgs[0]["parts"][0]["body"])
            conn.request("POST", base + "/conversations/" + cid + "/messages",
                         json.dumps({"sender": {"name": "Admin"}, "parts": [{"body": "system", "mime_type": "text/plain"}]}), h)
            r = conn.getresponse(); m = json.loads(r.read()); print(r.status, m["sender"]["name"])
            conn.request("POST", base + "/announcements",
                         json.dumps({"recipients": ["bob"], "sender": {"name": "Admin"}, "parts": [{"body": "all", "mime_type": "text/plain"}]}), h)
            r = conn.getresponse(); a = json.loads(r.read()); print(r.status, a["recipients"])
            conn.request("POST", base + "/users/bob/blocks", json.dumps({"user_id": "alice"}), h)
            r = conn.getresponse(); r.read(); print(r.status)
            conn.request("GET", base + "/users/bob/blocks", headers=h)
            r = conn.getresponse(); print(r.status, json.loads(r.read()))
            conn.request("PUT", base + "/users/bob/badge", json.dumps({"external_unread_count": 2}), h)
            r = conn.getresponse(); r.read(); print(r.status)
            conn.request("GET", base + "/users/bob/badge", headers=h)
            r = conn.getresponse(); b = json.loads(r.read()); print(r.status, b["external_unread_count"], b["unread_conversation_count"], b["unread_message_count"])
            conn.request("GET", base + "/conversations/" + cid, headers={"Accept": h["Accept"]})
            r = conn.getresponse(); err = json.loads(r.read()); print(r.status, err["id"])
            print("same-connection", conn.sock is sock)
            """
        let result = try await ExternalCommand.run(
            "/usr/bin/python3",
            [
                "-c", script, node.server.prepared.certificatePath,
                node.server.url.replacingOccurrences(of: "https://", with: ""),
                api.appID, api.token,
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout.split(separator: "\n") == [
                "201 11", "201", "200 from python", "201 Admin", "202 ['bob']", "204", "200 [{'user_id': 'alice'}]",
                "204", "200 2 2 2",
                "401 authentication_required", "same-connection True",
            ])
        await node.stop()
    }

    /// A conversation created empty through the Server API appears on a participant's
    /// device at once, and a message sent through it arrives there.
    @Test func serverAPICallsReachAnSDKClientLive() async throws {
        let node = try await TestNode.start("api-e2e")
        let bob = try ClientHarness.device("bob", on: node)
        _ = try await ClientHarness.connectLive(bob, on: node)
        let api = CurlAPI(node.server, http: .http2)
        let created = try await api.request(
            "POST", "/conversations", json: #"{"participants":["alice","bob"],"metadata":{"title":"from the backend"}}"#
        )
        #expect(created.status == 201)
        let id = ConversationID(uuid: UUID(uuidString: Self.conversationUUID(created.object))!)
        let seen = try await bob.waitForCreation(of: id, timeout: .seconds(30))
        #expect(seen.conversation.participants == ["alice", "bob"])
        #expect(seen.conversation.metadata.values["title"] == .string("from the backend"))

        let sent = try await CurlAPI(node.server, http: .http1, version: "1.0").request(
            "POST", "/conversations/\(id.uuid.uuidString)/messages",
            json: #"{"sender":{"user_id":"alice"},"parts":[{"body":"hello from the API","mime_type":"text/plain"}]}"#)
        #expect(sent.status == 201)
        let messageID = MessageID(
            uuid: UUID(
                uuidString: (sent.object["id"] as? String ?? "").replacingOccurrences(
                    of: "layer:///messages/", with: ""))!)
        let message = try await bob.waitForCreation(of: messageID, timeout: .seconds(30))
        #expect(message.message.sender == "alice")
        #expect(message.message.parts.first?.inlineBytes == Array("hello from the API".utf8))
        #expect(message.isUnread)

        // A system message reaches the device with its sender's name.
        let system = try await api.request(
            "POST", "/conversations/\(id.uuid.uuidString)/messages",
            json: #"{"sender":{"name":"Admin"},"parts":[{"body":"from the system","mime_type":"text/plain"}]}"#)
        #expect(system.status == 201)
        let systemID = MessageID(
            uuid: UUID(
                uuidString: (system.object["id"] as? String ?? "").replacingOccurrences(
                    of: "layer:///messages/", with: ""))!)
        let fromSystem = try await bob.waitForCreation(of: systemID, timeout: .seconds(30))
        #expect(fromSystem.message.sender.systemSenderName == "Admin")
        #expect(fromSystem.isUnread)

        // An announcement arrives in bob's announcements conversation, from the system sender.
        let announced = try await api.request(
            "POST", "/announcements",
            json:
                #"{"recipients":["bob"],"sender":{"name":"The System"},"parts":[{"body":"an announcement","mime_type":"text/plain"}]}"#
        )
        #expect(announced.status == 202)
        let announcements = ConversationID(
            uuid: UUID(
                uuidString: Self.conversationUUID(
                    try await api.request("GET", "/users/bob/conversations?sort_by=last_message").array.first ?? [:]))!)
        let announcementsConversation = try await bob.waitForCreation(of: announcements, timeout: .seconds(30))
        #expect(announcementsConversation.conversation.participants == ["bob"])
        #expect(announcementsConversation.conversation.metadata.values["lamina_announcements"] == .string("true"))
        try await ClientHarness.waitUntil(bob, "the announcement", timeout: .seconds(30)) {
            try bob.messages(in: announcements).contains { $0.message.sender.systemSenderName == "The System" }
        }
        try await bob.close()
        await node.stop()
    }
}
