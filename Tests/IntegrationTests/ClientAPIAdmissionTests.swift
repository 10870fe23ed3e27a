import Foundation
import LaminaModel
import LaminaNode
import LaminaTransport
import NIOConcurrencyHelpers
import NIOCore
import Testing

/// What the node checks of a Client API client before spending on it: the session token of a
/// request with a body before the body is read (curl over HTTP/1.1 and HTTP/2), and each
/// WebSocket counted in the node's outbound budget as a sync stream is.
@Suite struct ClientAPIAdmissionTests {
    @Test(arguments: [CurlAPI.HTTP.http1, .http2])
    func aDeadSessionTokenIsRefusedBeforeTheBody(http: CurlAPI.HTTP) async throws {
        let node = try await TestNode.start("capi-before-body-\(http == .http1 ? "h1" : "h2")")
        let file = NSTemporaryDirectory() + "capi-body-\(UUID().uuidString).json"
        // A JSON body just under the 256 KiB bound: at 8 KB/s curl needs 30 s to send it.
        let padding = String(repeating: "x", count: 240_000)
        try Data(#"{"participants":["bob"],"metadata":{"pad":"\#(padding)"}}"#.utf8).write(
            to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let start = Date()
        let result = try await ExternalCommand.run(
            "/usr/bin/curl",
            [
                "-sS", http.rawValue, "--cacert", node.server.prepared.certificatePath, "-X", "POST",
                "-H", "Accept: application/vnd.layer+json; version=3.0", "-H", "Content-Type: application/json",
                "-H", #"Authorization: Layer session-token="not-a-live-token""#, "--limit-rate", "8k",
                "--data-binary", "@\(file)", "-w", "\n@@%{http_code}", node.server.url + "/conversations",
            ])
        let elapsed = Date().timeIntervalSince(start)
        let parts = result.stdout.components(separatedBy: "\n@@")
        #expect(parts.last == "401", "curl: \(result.stdout) \(result.stderr)")
        #expect(elapsed < 15, "the 401 took \(elapsed) s: the body was read first")
        let object =
            (try? JSONSerialization.jsonObject(with: Data(parts[0].utf8))) as? [String: Any] ?? [:]
        #expect(object["id"] as? String == "authentication_required")
        #expect(((object["data"] as? [String: Any])?["nonce"] as? String)?.isEmpty == false)
        // A live session's request with a body is served as before.
        let alice = try await ClientAPICurl.session("alice", on: node, http: http)
        let created = try await alice.request("POST", "/conversations", json: #"{"participants":["bob"]}"#)
        #expect(created.status == 201)
        await node.stop()
    }

    @Test func aWebSocketIsCountedInTheNodesOutboundBudget() async throws {
        let node = try await TestNode.start("capi-ws-budget")
        let budget = node.server.outboundBudget
        let alice = try await ClientAPICurl.session("alice", on: node, http: .http1)
        #expect(budget.openStreams == 0)
        let packets = NIOLockedValueBox(0)
        let socket = try await ClientAPIWebSocketChangeTests.socket(
            of: alice, on: node, onText: { _ in packets.withLockedValue { $0 += 1 } })
        #expect(socket.subprotocol == "layer-3.0")
        #expect(await Self.eventually { budget.openStreams == 1 })
        // A packet goes out (a Conversation.create answer) and its bytes leave the budget.
        socket.send(
            text:
                #"{"type":"request","body":{"request_id":"r1","method":"Conversation.create","data":{"participants":["bob"]}}}"#
        )
        #expect(await Self.eventually { packets.withLockedValue { $0 } >= 1 })
        #expect(await Self.eventually { budget.total == 0 })
        await socket.close()
        #expect(await Self.eventually { budget.openStreams == 0 })
        await node.stop()
    }

    /// Polls `condition` every 10 ms for up to 10 s.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}
