import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// `deauthenticate()` ends the session on a real node (SPEC §5.8), not only the local data.
@Suite struct ClientSDKDeauthenticationTests {
    @Test func afterDeauthenticateTheOldSessionTokenIsRefused() async throws {
        let node = try await TestNode.start("sdk-deauthenticate")
        let alice = try ClientHarness.device("alice", on: node)
        let events = try await ClientHarness.connectLive(alice, on: node)
        let conversation = try alice.newConversation(participants: ["bob"]).id
        let sent = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "bye")]), in: conversation).id
        try await ClientHarness.waitUntil(alice, "the message sent") { try alice.isSent(sent) }
        guard let token = try alice.store.sessionToken() else {
            Issue.record("no session token after authentication")
            return
        }
        let device = try alice.store.deviceID()

        // Before: the token resumes a session on another stream.
        let before = try await node.connect()
        _ = try await before.hello()
        let resumed = try await before.resume(token: token, device: device)
        guard case .authenticated = resumed else {
            Issue.record("the live token did not resume: \(resumed)")
            return
        }

        let folder = alice.store.location.userDirectory
        try await alice.deauthenticate()
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        // The node ended the other stream of that session.
        let ended = try await before.framesUntilEnd()
        #expect(ended.contains { if case .error(let e) = $0 { e.code == .sessionRevoked && e.isFatal } else { false } })
        // And refuses the token from now on.
        let after = try await node.connect()
        _ = try await after.hello()
        let refused = try await after.resume(token: token, device: device)
        guard case .error(let error) = refused else {
            Issue.record("the revoked token was accepted: \(refused)")
            return
        }
        #expect(error.code == .sessionRevoked)
        // The client signed out: it did not reconnect, nor ask for a new identity token.
        #expect(!events.all.contains(.sessionExpired))
        #expect(events.all.filter { $0 == .state(.live) }.count == 1)
        #expect(try await node.server.store.read { r in try r.messageCount(of: conversation) } == 1)

        await after.drop()
        await node.stop()
    }
}

extension SyncTestClient {
    /// Sends RESUME_SESSION with `token`; the answer (AUTHENTICATED or ERROR).
    func resume(token: String, device: UUID) async throws -> Frame {
        let id = UUID()
        send(.resumeSession(ResumeSession(requestID: id, sessionToken: token, deviceID: device)))
        return try await answer(to: id)
    }
}
