import Foundation
import LaminaModel
import LaminaNode
import Testing

/// What Layer's Platform API clients expect of the Server API beyond the basics (issue #33),
/// through curl over HTTP/1.1 and HTTP/2: versions 1.1 and 2.0, whole identities under 1.0,
/// the block list's Layer semantics and 3.0 PATCH form, `Layer-Count`,
/// `X-HTTP-Method-Override`, a message from a user's view, and reading and replacing parts.
@Suite struct ServerAPILayerFidelityTests {
    static func name(_ http: CurlAPI.HTTP) -> String { http == .http1 ? "h1" : "h2" }

    static func sendText(_ api: CurlAPI, _ conversation: String, from user: String, _ text: String) async throws
        -> [String: Any]
    {
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json: """
                {"sender_id":"layer:///identities/\(user)","parts":[{"body":"\(text)","mime_type":"text/plain"}]}
                """)
        #expect(sent.status == 201, "\(sent.body)")
        return sent.object
    }

    static func uuid(_ value: Any?, after prefix: String) -> String {
        (value as? String ?? "").replacingOccurrences(of: prefix, with: "")
    }

    /// 1.0 and 1.1 show users as user ids, 2.0 and 3.0 as identities; only 3.0 gives parts ids
    /// and serves the parts routes; another version is 406.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func everyLayerVersionIsServedWithItsShapes(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-versions-\(Self.name(http))")
        let v3 = CurlAPI(node.server, http: http)
        let created = try await v3.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let message = Self.uuid(
            try await Self.sendText(v3, conversation, from: "alice", "hello")["id"], after: "layer:///messages/")

        for version in ["1.0", "1.1", "2.0", "3.0"] {
            let api = CurlAPI(node.server, http: http, version: version)
            let got = try await api.request("GET", "/conversations/\(conversation)")
            #expect(got.status == 200, "\(version): \(got.body)")
            #expect(got.httpVersion == (http == .http1 ? "1.1" : "2"))
            let identities = version == "2.0" || version == "3.0"
            let participants = got.object["participants"] as? [Any] ?? []
            if identities {
                #expect(
                    participants.compactMap { ($0 as? [String: Any])?["id"] as? String } == [
                        "layer:///identities/alice", "layer:///identities/bob",
                    ], "\(version)")
            } else {
                #expect(participants.compactMap { $0 as? String } == ["alice", "bob"], "\(version)")
            }
            let read = try await api.request("GET", "/conversations/\(conversation)/messages/\(message)")
            #expect(read.status == 200, "\(version): \(read.body)")
            let sender = read.object["sender"] as? [String: Any]
            #expect((sender?["id"] as? String == "layer:///identities/alice") == identities, "\(version)")
            #expect((sender?["user_id"] as? String) == "alice", "\(version)")
            let part = (read.object["parts"] as? [[String: Any]])?.first
            #expect((part?["id"] != nil) == (version == "3.0"), "\(version)")
            let parts = try await api.request("GET", "/conversations/\(conversation)/messages/\(message)/parts")
            #expect(parts.status == (version == "3.0" ? 200 : 404), "\(version): \(parts.body)")
        }
        let unserved = try await v3.request(
            "GET", "/conversations/\(conversation)",
            headers: ["Authorization": "Bearer \(v3.token)", "Accept": "application/vnd.layer+json; version=2.5"])
        #expect(unserved.status == 406)
        #expect(unserved.object["id"] as? String == "invalid_header")
        #expect((unserved.object["message"] as? String)?.contains("1.0, 1.1, 2.0 and 3.0") == true)
        await node.stop()
    }

    /// Under 1.0 (and every version) the identity routes show the identity whole.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func identitiesAreWholeUnderVersionOne(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-identity-v1-\(Self.name(http))")
        let v1 = CurlAPI(node.server, http: http, version: "1.0")
        let body =
            #"{"display_name":"Frodo B.","first_name":"Frodo","last_name":"Baggins","metadata":{"home":"Shire"}}"#
        let created = try await v1.request("POST", "/users/frodo/identity", json: body)
        #expect(created.status == 201, "\(created.body)")
        for version in ["1.0", "1.1", "2.0", "3.0"] {
            let got = try await CurlAPI(node.server, http: http, version: version).request(
                "GET", "/users/frodo/identity")
            #expect(got.status == 200, "\(version)")
            #expect(got.object["display_name"] as? String == "Frodo B.", "\(version)")
            #expect(got.object["first_name"] as? String == "Frodo", "\(version)")
            #expect(got.object["last_name"] as? String == "Baggins", "\(version)")
            #expect(got.object["metadata"] as? [String: String] == ["home": "Shire"], "\(version)")
        }
        let replaced = try await v1.request(
            "PUT", "/users/frodo/identity", json: #"{"display_name":"Mr. Underhill","first_name":"Frodo"}"#)
        #expect(replaced.status == 204)
        let after = try await v1.request("GET", "/users/frodo/identity")
        #expect(after.object["display_name"] as? String == "Mr. Underhill")
        #expect(after.object["last_name"] == nil || after.object["last_name"] is NSNull)
        await node.stop()
    }

    /// Blocking oneself is accepted and changes nothing; unblocking a user not blocked is 204;
    /// 3.0's `PATCH /users/:owner` adds, removes and sets; the list carries `Layer-Count`.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func blockListsFollowLayer(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-block-patch-\(Self.name(http))")
        let api = CurlAPI(node.server, http: http)
        #expect(try await api.request("POST", "/users/bob/blocks", json: #"{"user_id":"bob"}"#).status == 204)
        #expect(try await api.request("DELETE", "/users/bob/blocks/nobody").status == 204)
        let empty = try await api.request("GET", "/users/bob/blocks")
        #expect(empty.array.isEmpty)
        #expect(empty.headers["layer-count"] == "0")

        func patch(_ json: String, contentType: String = "application/vnd.layer-patch+json") async throws
            -> CurlAPI.Response
        {
            try await api.request("PATCH", "/users/bob", json: json, contentType: contentType)
        }
        func blocked() async throws -> [String] {
            try await api.request("GET", "/users/bob/blocks").array.compactMap { $0["user_id"] as? String }
        }
        let added = try await patch(
            #"[{"operation":"add","property":"blocks","id":"layer:///identities/eve"},{"operation":"add","property":"blocks","value":["mallory","trent"]}]"#
        )
        #expect(added.status == 204, "\(added.body)")
        #expect(try await blocked() == ["eve", "mallory", "trent"])
        let listed = try await api.request("GET", "/users/bob/blocks")
        #expect(listed.headers["layer-count"] == "3")
        #expect(
            try await patch(#"[{"operation":"remove","property":"blocks","id":"layer:///identities/mallory"}]"#).status
                == 204)
        #expect(try await blocked() == ["eve", "trent"])
        #expect(try await patch(#"[{"operation":"set","property":"blocks","value":["trent","zed"]}]"#).status == 204)
        #expect(try await blocked() == ["trent", "zed"])

        // All checked before any applies.
        let bad = try await patch(
            #"[{"operation":"add","property":"blocks","id":"ann"},{"operation":"set","property":"nickname","value":"x"}]"#
        )
        #expect(bad.status == 422)
        #expect((bad.object["data"] as? [String: Any])?["property"] as? String == "[1].property")
        #expect(try await blocked() == ["trent", "zed"])
        #expect(try await patch(#"[{"operation":"frob","property":"blocks","id":"ann"}]"#).status == 422)
        #expect(try await patch(#"[{"operation":"add","property":"blocks"}]"#).status == 422)
        #expect(try await patch(#"[]"#, contentType: "application/json").status == 415)
        await node.stop()
    }

    /// `Layer-Count` on the conversation and message lists: all there are, not the page.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func listsCarryLayerCount(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-layer-count-\(Self.name(http))")
        let api = CurlAPI(node.server, http: http)
        for other in ["bob", "carol", "dave"] {
            let created = try await api.request(
                "POST", "/conversations", json: #"{"participants":["alice","\#(other)"]}"#)
            #expect(created.status == 201)
        }
        let page = try await api.request("GET", "/users/alice/conversations?page_size=2")
        #expect(page.array.count == 2)
        #expect(page.headers["layer-count"] == "3")
        let conversation = ServerAPITests.conversationUUID(page.array[0])
        for n in 1...3 { _ = try await Self.sendText(api, conversation, from: "alice", "m\(n)") }
        let messages = try await api.request("GET", "/conversations/\(conversation)/messages?page_size=1")
        #expect(messages.array.count == 1)
        #expect(messages.headers["layer-count"] == "3")
        let mine = try await api.request(
            "GET", "/users/alice/conversations/\(conversation)/messages?page_size=2")
        #expect(mine.array.count == 2)
        #expect(mine.headers["layer-count"] == "3")
        await node.stop()
    }

    /// POST with `X-HTTP-Method-Override: PATCH` is a PATCH; the header names PATCH, PUT or
    /// DELETE on a POST only.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func methodOverrideTurnsAPostIntoAPatch(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-override-\(Self.name(http))")
        let api = CurlAPI(node.server, http: http)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        func headers(_ method: String) -> [String: String] {
            [
                "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
                "X-HTTP-Method-Override": method,
            ]
        }
        let patched = try await api.request(
            "POST", "/conversations/\(conversation)",
            json: #"[{"operation":"set","property":"metadata.stats.counter","value":"10"}]"#,
            headers: headers("PATCH"), contentType: "application/vnd.layer-patch+json")
        #expect(patched.status == 204, "\(patched.body)")
        let got = try await api.request("GET", "/conversations/\(conversation)")
        #expect(got.object["metadata"] as? [String: [String: String]] == ["stats": ["counter": "10"]])

        let asGet = try await api.request(
            "POST", "/conversations/\(conversation)", json: "{}", headers: headers("GET"))
        #expect(asGet.status == 400)
        #expect(asGet.object["id"] as? String == "invalid_header")
        let onGet = try await api.request("GET", "/conversations/\(conversation)", headers: headers("DELETE"))
        #expect(onGet.status == 400)
        let deleted = try await api.request("POST", "/conversations/\(conversation)", headers: headers("delete"))
        #expect(deleted.status == 204, "\(deleted.body)")
        #expect(try await api.request("GET", "/conversations/\(conversation)").status != 200)
        await node.stop()
    }

    /// `GET /users/:user_id/messages/:message_id`: the message as that user sees it.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func aMessageIsReadFromAUsersView(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-user-message-\(Self.name(http))")
        let api = CurlAPI(node.server, http: http)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let sent = try await Self.sendText(api, conversation, from: "alice", "for bob")
        let message = Self.uuid(sent["id"], after: "layer:///messages/")

        let bobs = try await api.request("GET", "/users/bob/messages/\(message)")
        #expect(bobs.status == 200, "\(bobs.body)")
        #expect(bobs.object["id"] as? String == "layer:///messages/\(message)")
        #expect(bobs.object["is_unread"] as? Bool == true)
        let alices = try await api.request("GET", "/users/alice/messages/\(message)")
        #expect(alices.object["is_unread"] as? Bool == false)
        let stranger = try await api.request("GET", "/users/mallory/messages/\(message)")
        #expect(stranger.status == 404)
        #expect(stranger.object["id"] as? String == "not_found")
        #expect(try await api.request("GET", "/users/bob/messages/\(UUID().uuidString)").status == 404)
        #expect(try await api.request("GET", "/users/bob/messages/not-a-uuid").status == 404)

        // A user bob blocks: their message is not his to read.
        #expect(try await api.request("POST", "/users/bob/blocks", json: #"{"user_id":"alice"}"#).status == 204)
        #expect(try await api.request("GET", "/users/bob/messages/\(message)").status == 404)
        await node.stop()
    }

    /// 3.0: a message's parts listed and read one by one; `PUT …/parts` replaces them all,
    /// keeping the ids it names.
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func partsAreListedReadAndReplacedWhole(_ http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("api-parts-read-\(Self.name(http))")
        let api = CurlAPI(node.server, http: http)
        let created = try await api.request("POST", "/conversations", json: #"{"participants":["alice","bob"]}"#)
        let conversation = ServerAPITests.conversationUUID(created.object)
        let sent = try await api.request(
            "POST", "/conversations/\(conversation)/messages",
            json:
                #"{"sender_id":"layer:///identities/alice","parts":[{"body":"one","mime_type":"text/plain"},{"body":"two","mime_type":"text/plain"}]}"#
        )
        let message = Self.uuid(sent.object["id"], after: "layer:///messages/")
        let base = "/conversations/\(conversation)/messages/\(message)/parts"

        let listed = try await api.request("GET", base)
        #expect(listed.status == 200)
        #expect(listed.headers["layer-count"] == "2")
        #expect(listed.array.compactMap { $0["body"] as? String } == ["one", "two"])
        let ids = listed.array.compactMap { $0["id"] as? String }
        #expect(ids.count == 2 && ids.allSatisfy { $0.hasPrefix("layer:///messages/\(message)/parts/") })
        let second = Self.uuid(ids[1], after: "layer:///messages/\(message)/parts/")
        let one = try await api.request("GET", "\(base)/\(second)")
        #expect(one.status == 200)
        #expect(one.object["body"] as? String == "two")
        #expect(try await api.request("GET", "\(base)/\(UUID().uuidString)").status == 404)

        let replaced = try await api.request(
            "PUT", base,
            json:
                #"[{"id":"\#(ids[1])","body":"two, edited","mime_type":"text/plain"},{"body":"three","mime_type":"text/plain"}]"#
        )
        #expect(replaced.status == 200, "\(replaced.body)")
        let now = try await api.request("GET", base)
        #expect(now.array.compactMap { $0["body"] as? String } == ["two, edited", "three"])
        let newIDs = now.array.compactMap { $0["id"] as? String }
        #expect(newIDs.first == ids[1])
        #expect(!ids.contains(newIDs[1]))

        for (json, status) in [
            ("[]", 422),
            (
                #"[{"id":"layer:///messages/\#(message)/parts/\#(UUID().uuidString)","body":"x","mime_type":"text/plain"}]"#,
                422
            ),
            (
                #"[{"id":"\#(ids[1])","body":"a","mime_type":"text/plain"},{"id":"\#(ids[1])","body":"b","mime_type":"text/plain"}]"#,
                422
            ),
            (#"[7]"#, 422), (#"{"body":"x"}"#, 400),
        ] {
            let refused = try await api.request("PUT", base, json: json)
            #expect(refused.status == status, "\(json): \(refused.body)")
        }
        #expect(
            try await CurlAPI(node.server, http: http, version: "2.0").request("PUT", base, json: "[]").status == 404)
        await node.stop()
    }
}
