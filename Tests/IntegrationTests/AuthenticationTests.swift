import Foundation
import LaminaLocalNode
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Every authentication failure over the wire, and authorization failures.
@Suite struct AuthenticationTests {
    /// The ERROR answering an AUTHENTICATE with `token` on a fresh stream.
    static func refusal(_ node: TestNode, token: (String) throws -> String) async throws -> WireError.Code? {
        let client = try await node.connect()
        defer { Task { await client.close() } }
        _ = try await client.hello()
        let nonce = try await client.nonce()
        let answer = try await client.authenticate(token: try token(nonce), device: UUID())
        guard case .error(let error) = answer else { return nil }
        return error.code
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decodeBase64URL(_ text: Substring) -> Data {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)!
    }

    /// A token with its claims changed (signature kept: no longer valid for those claims).
    static func tampered(_ token: String, _ change: (inout [String: Any]) -> Void) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        var claims = try! JSONSerialization.jsonObject(with: decodeBase64URL(parts[1])) as! [String: Any]
        change(&claims)
        let body = base64URL(try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        return "\(parts[0]).\(body).\(parts[2])"
    }

    @Test func eachAuthenticationFailureHasItsCode() async throws {
        let node = try await TestNode.start("auth")
        let dev = node.dev
        let user: UserID = "alice"

        // A command before authentication.
        let early = try await node.connect()
        _ = try await early.hello()
        let requestID = UUID()
        early.send(.sync(SyncRequest(requestID: requestID, cursor: 0)))
        let earlyAnswer = try await early.answer(to: requestID)
        guard case .error(let earlyError) = earlyAnswer else {
            Issue.record("expected authentication-required, got \(earlyAnswer)")
            return
        }
        #expect(earlyError.code == .authenticationRequired)
        await early.close()

        #expect(
            try await Self.refusal(node) { _ in try dev.mintToken(user: user, nonce: "never-issued") } == .unknownNonce)
        #expect(try await Self.refusal(node) { _ in "not-a-jwt" } == .malformedToken)
        #expect(
            try await Self.refusal(node) { nonce in
                try dev.mintToken(user: user, nonce: nonce, lifetime: .seconds(-3600))
            }
                == .tokenExpired)

        let otherKey = try DevIdentityProvider.loadOrCreate(in: Fixtures.temporaryDirectory("other-dev-key"))
        #expect(
            try await Self.refusal(node) { nonce in try otherKey.mintToken(user: user, nonce: nonce) } == .badSignature)

        #expect(
            try await Self.refusal(node) { nonce in
                Self.tampered(try dev.mintToken(user: user, nonce: nonce)) { $0["iss"] = "nobody" }
            } == .unknownProvider)

        #expect(
            try await Self.refusal(node) { nonce in
                let token = try dev.mintToken(user: user, nonce: nonce)
                let parts = token.split(separator: ".")
                let header = Self.base64URL(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
                return "\(header).\(parts[1])."
            } == .algorithmNotAllowed)

        // A nonce used once is spent.
        let first = try await node.connect()
        _ = try await first.hello()
        let nonce = try await first.nonce()
        let token = try dev.mintToken(user: user, nonce: nonce)
        guard case .authenticated = try await first.authenticate(token: token, device: UUID()) else {
            Issue.record("the first use of a nonce should authenticate")
            return
        }
        #expect(try await Self.refusal(node) { _ in token } == .nonceReused)
        await first.close()
        await node.stop()
    }

    @Test func onlyParticipantsWriteAndRemovedOnesGetNothingAfter() async throws {
        let node = try await TestNode.start("authz")
        let alice = try await node.session(MessagingTests.alice, device: UUID())
        let carol = try await node.session(MessagingTests.carol, device: UUID())
        let conversation = try await MessagingTests.conversation(
            alice, with: [MessagingTests.alice, MessagingTests.bob])
        _ = try await MessagingTests.send(alice, conversation, "private")

        do {
            _ = try await MessagingTests.send(carol, conversation, "let me in")
            Issue.record("a non-participant could send")
        } catch let failure as CommandFailed {
            #expect(failure.error.code == .notAParticipant)
            #expect(!failure.error.isFatal)
        }

        // Bob is removed; what follows does not reach him.
        let removal = UUID()
        try await alice.command(
            .removeParticipants(
                ParticipantsUpdate(requestID: removal, conversationID: conversation, users: [MessagingTests.bob])),
            id: removal)
        let (after, _) = try await MessagingTests.send(alice, conversation, "after bob left")
        let bob = try await node.session(MessagingTests.bob, device: UUID())
        let received = bob.seenChanges.compactMap { change -> MessageID? in
            if case .messageCreated(let m) = change.event { return m.id }
            return nil
        }
        #expect(!received.contains(after))
        do {
            _ = try await MessagingTests.send(bob, conversation, "still here?")
            Issue.record("a removed participant could send")
        } catch let failure as CommandFailed {
            #expect([WireError.Code.notAParticipant, .removedParticipant].contains(failure.error.code))
        }
        for c in [alice, bob, carol] { await c.close() }
        await node.stop()
    }
}
