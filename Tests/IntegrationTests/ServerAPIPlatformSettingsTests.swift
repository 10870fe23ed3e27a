import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import LaminaWire
import Testing

/// Layer's Platform API beyond messages (issue #33): push-only notifications
/// (`POST /notifications`), user suspension (`PATCH /users/:id` `suspended`, `GET /users/:id`)
/// and the session lifetime (`sessionLifetimeSeconds`), over HTTP/1.1 and HTTP/2 on a real node.
@Suite struct ServerAPIPlatformSettingsTests {
    static func name(_ base: String, _ http: CurlAPI.HTTP) -> String { "\(base)-\(http == .http1 ? "h1" : "h2")" }

    // MARK: Notifications

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func aNotificationIsPushedToOfflineDevicesWithoutAMessage(http: CurlAPI.HTTP) async throws {
        let fake = try await FakePushServer.start(http1: true)
        let node = try await PushPathsTests.gatewayNode(Self.name("notify", http), fake: fake)
        let bob = try await PushTests.registered(node, "bob", device: UUID(), .gateway(token: "bob-gw"))
        await bob.close()
        try await PushTests.waitForSessions(node, 0)
        let api = CurlAPI(node.server, http: http)
        let id = UUID()
        let body =
            #"{"recipients":["layer:///identities/bob","carol"],"notification":{"text":"ping","title":"Heads up","data":{"k":"v"},"recipients":{"layer:///identities/bob":{"sound":"bell"}}}}"#
        let headers = [
            "Authorization": "Bearer \(api.token)", "Accept": "application/vnd.layer+json; version=3.0",
            "If-None-Match": "\"\(id.uuidString)\"",
        ]
        let sent = try await api.request("POST", "/notifications", json: body, headers: headers)
        #expect(sent.status == 202, "\(sent.body)")
        #expect(sent.object["id"] as? String == "layer:///notifications/\(id.uuidString.lowercased())")
        #expect(sent.object["recipients"] as? [String] == ["layer:///identities/bob", "layer:///identities/carol"])
        #expect((sent.object["notification"] as? [String: Any])?["text"] as? String == "ping")
        // No message and no conversation was made.
        #expect(try await api.request("GET", "/users/bob/conversations").array.isEmpty)

        let first = try await fake.waitForRequests(1)[0]
        let n = PushPathsTests.notification(first)
        #expect(first.json["user_id"] as? String == "bob")
        #expect(n["alert"] as? String == "ping")
        #expect(n["title"] as? String == "Heads up")
        #expect(n["sound"] as? String == "bell")  // bob's override
        #expect((n["data"] as? [String: String]) == ["k": "v"])
        #expect(n["message_id"] as? String == "layer:///notifications/\(id.uuidString.lowercased())")
        #expect(n["conversation_id"] == nil)
        #expect(n["sender_id"] == nil)

        // The same notification again pushes nothing; a new one is the next push.
        #expect(try await api.request("POST", "/notifications", json: body, headers: headers).status == 202)
        let next = try await api.request(
            "POST", "/notifications", json: #"{"recipients":["bob"],"notification":{"text":"second"}}"#)
        #expect(next.status == 202, "\(next.body)")
        let second = try await fake.waitForRequests(2)[1]
        #expect(PushPathsTests.notification(second)["alert"] as? String == "second")

        // Checked before anything is queued: each refusal names the property.
        for (bad, property) in [
            (#"{"notification":{"text":"x"}}"#, "recipients"),
            (#"{"recipients":[],"notification":{"text":"x"}}"#, "recipients"),
            (#"{"recipients":["bob"]}"#, "notification"),
            (#"{"recipients":["bob"],"notification":"x"}"#, "notification"),
            (#"{"recipients":["bob"],"notification":{"sound":"bell"}}"#, "notification.text"),
            (#"{"recipients":["bob"],"notification":{"text":7}}"#, "notification.text"),
        ] {
            let refused = try await api.request("POST", "/notifications", json: bad)
            #expect(refused.status == 422, "\(bad): \(refused.body)")
            #expect((refused.object["data"] as? [String: Any])?["property"] as? String == property, "\(bad)")
        }
        await node.stop()
        await fake.stop()
    }

    // MARK: Suspension

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func aSuspendedUserIsLoggedOutAndCannotLogInUntilUnsuspended(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start(Self.name("suspend", http))
        let api = CurlAPI(node.server, http: http)
        let stream = try await node.session("alice", device: UUID())
        let rest = try await ClientAPICurl.session("alice", on: node, http: http)
        #expect(try await rest.request("GET", "/conversations").status == 200)
        #expect(try await api.request("GET", "/users/alice").object["suspended"] as? Bool == false)

        let suspend = try await api.request(
            "PATCH", "/users/alice", json: #"[{"operation":"set","property":"suspended","value":true}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(suspend.status == 204, "\(suspend.body)")
        let status = try await api.request("GET", "/users/alice")
        #expect(status.status == 200)
        #expect(status.object["suspended"] as? Bool == true)
        #expect(status.object["id"] as? String == "layer:///identities/alice")
        #expect(try await api.request("GET", "/users/bob").object["suspended"] as? Bool == false)

        // Her open stream ends, her REST session is gone, and she cannot log in again.
        let frames = try await stream.framesUntilEnd()
        guard case .error(let ended)? = frames.last else {
            Issue.record("alice's stream did not end with an ERROR: \(frames)")
            return
        }
        #expect(ended.code == .sessionRevoked && ended.isFatal)
        #expect(try await rest.request("GET", "/conversations").status == 401)
        do {
            let refused = try await node.session("alice", device: UUID())
            Issue.record("a suspended user logged in")
            await refused.close()
        } catch let failed as CommandFailed {
            #expect(failed.error.code == .forbidden)
            #expect(failed.error.reason.contains("suspended"))
        }
        let login = try await Self.clientLogin("alice", on: node, http: http)
        #expect(login.status == 403, "\(login.body)")
        // Others are untouched.
        let bob = try await node.session("bob", device: UUID())
        await bob.close()

        // A value other than a boolean is refused; unsuspended, she logs in again.
        let bad = try await api.request(
            "PATCH", "/users/alice", json: #"[{"operation":"set","property":"suspended","value":"no"}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(bad.status == 422, "\(bad.body)")
        let unsuspend = try await api.request(
            "PATCH", "/users/alice", json: #"[{"operation":"set","property":"suspended","value":false}]"#,
            contentType: "application/vnd.layer-patch+json")
        #expect(unsuspend.status == 204)
        let again = try await node.session("alice", device: UUID())
        await again.close()
        #expect(try await Self.clientLogin("alice", on: node, http: http).status == 201)
        await stream.close()
        await node.stop()
    }

    /// POST /nonces, a dev identity token, POST /sessions: the answer as it is.
    static func clientLogin(_ user: UserID, on node: TestNode, http: CurlAPI.HTTP) async throws -> CurlAPI.Response {
        let client = ClientAPICurl(node, http: http)
        let nonce = try await client.request("POST", "/nonces")
        let value = try #require(nonce.object["nonce"] as? String)
        let token = try node.dev.mintToken(user: user, nonce: value)
        let appID = node.server.serverAPICredentials!.appID
        return try await client.request(
            "POST", "/sessions", json: #"{"identity_token":"\#(token)","app_id":"layer:///apps/staging/\#(appID)"}"#)
    }

    // MARK: Session lifetime

    /// Connects to the WebSocket with a session token (argv: CA file, host:port, token), reads
    /// until the node closes it and prints `closed <code>`.
    static let webSocketScript = #"""
        import asyncio, ssl, sys, websockets
        ctx = ssl.create_default_context(cafile=sys.argv[1])
        async def main():
            url = "wss://" + sys.argv[2] + "/websocket?session_token=" + sys.argv[3]
            async with websockets.connect(url, ssl=ctx, subprotocols=["layer-2.0"]) as ws:
                try:
                    while True: await asyncio.wait_for(ws.recv(), 60)
                except websockets.ConnectionClosed as e:
                    print("closed", e.rcvd.code if e.rcvd else None)
        asyncio.run(main())
        """#

    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func sessionsEndWithSessionExpiredOnceTheirLifetimeIsOver(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start(Self.name("session-ttl", http)) { $0.sessionLifetimeSeconds = 20 }
        let started = ContinuousClock.now
        let stream = try await node.session("alice", device: UUID())
        let rest = try await ClientAPICurl.session("alice", on: node, http: http)
        #expect(try await rest.request("GET", "/conversations").status == 200)
        // A WebSocket on the REST session (Python's `websockets`): closed with 4401 at expiry.
        let token = try #require(rest.sessionToken)
        let webSocket = Task {
            try await ExternalCommand.run(
                "/usr/bin/env",
                [
                    "python3", "-c", Self.webSocketScript, node.server.prepared.certificatePath,
                    node.server.url.replacingOccurrences(of: "https://", with: ""), token,
                ])
        }

        // The open stream ends with a fatal session-expired once the lifetime is over.
        let frames = try await stream.framesUntilEnd(timeout: .seconds(30))
        let lasted = ContinuousClock.now - started
        guard case .error(let ended)? = frames.last else {
            Issue.record("the stream did not end with an ERROR: \(frames)")
            return
        }
        #expect(ended.code == .sessionExpired && ended.isFatal)
        // Both logins came after `started`: their lifetime ends no sooner than 20 s after it
        // (20 s: on a loaded machine Python's start and the WebSocket's handshake took over 10).
        #expect(lasted >= .milliseconds(19_900), "ended after \(lasted)")
        // The REST session's token is refused the same way (401, a fresh nonce to log in with).
        let deadline = ContinuousClock.now + .seconds(30)
        var answer = try await rest.request("GET", "/conversations")
        while answer.status == 200, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            answer = try await rest.request("GET", "/conversations")
        }
        #expect(answer.status == 401, "\(answer.body)")
        #expect(answer.body.contains("expired"), "\(answer.body)")
        let closed = try await webSocket.value
        #expect(closed.stdout.hasPrefix("closed 4401"), "\(closed.stdout) \(closed.stderr.suffix(2_000))")
        // A new login works and gets a fresh lifetime.
        let again = try await node.session("alice", device: UUID())
        await again.close()
        await node.stop()

        // The setting is checked at start-up.
        var configuration = Fixtures.nodeConfiguration(Self.name("session-ttl-check", http))
        configuration.sessionLifetimeSeconds = 0
        #expect(throws: (any Error).self) { try configuration.validate() }
        configuration.sessionLifetimeSeconds = 31_536_001
        #expect(throws: (any Error).self) { try configuration.validate() }
        configuration.sessionLifetimeSeconds = 3_600
        try configuration.validate()
    }
}
