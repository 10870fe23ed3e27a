import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import Testing

@testable import LaminaLocalNode
@testable import LaminaNode
@testable import LaminaStore

@Suite struct EngineAuthTests {
    /// Opens a session, authenticates with `token(nonce)` and returns the reply.
    func authenticate(_ h: EngineHarness, token: (String) throws -> String) async throws -> (Frame, Client) {
        let client = try await h.open()
        let nonce = try await h.nonce(client)
        client.session.receive(
            .authenticate(Authenticate(requestID: UUID(), identityToken: try token(nonce), deviceID: UUID())))
        return (try await client.outbound.expectNext(), client)
    }

    func claims(_ nonce: String, iss: String = DevIdentityProvider.providerID, iat: Int64? = nil, exp: Int64? = nil)
        -> [String: Any]
    {
        let now = Int64(Date().timeIntervalSince1970)
        return ["iss": iss, "prn": "alice", "nce": nonce, "iat": iat ?? now, "exp": exp ?? now + 600]
    }

    @Test func devTokenAuthenticates() async throws {
        let h = try EngineHarness()
        let (reply, client) = try await authenticate(h) {
            try h.dev.mintToken(user: "alice", nonce: $0, displayName: "Alice")
        }
        guard case .authenticated(let a) = reply else {
            Issue.record("got \(reply)")
            return
        }
        #expect(a.identity == Identity(userID: "alice", displayName: "Alice"))
        #expect(a.sessionToken.utf8.count == 43)
        #expect(client.session.user == "alice")
        // The session is stored hashed, not in clear.
        let hash = try SHA256Hasher.hash(Array(a.sessionToken.utf8))
        let record = try await h.store.read { r in try r.session(tokenHash: hash, at: .now()) }
        #expect(record.user == "alice")
        await h.close()
    }

    func expectFailure(_ code: WireError.Code, _ h: EngineHarness, token: (String) throws -> String) async throws {
        let (reply, client) = try await authenticate(h, token: token)
        #expect(reply.errorFrame?.code == code, "got \(reply)")
        #expect(client.session.user == nil)
        // A fresh nonce follows, unasked.
        guard case .nonce(let n) = try await client.outbound.expectNext() else {
            Issue.record("no fresh nonce")
            return
        }
        #expect(n.requestID == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
    }

    @Test func eachAuthenticationFailureHasItsCode() async throws {
        let other = try EngineHarness()  // a second dev key: signs tokens the first node must refuse
        let h = try EngineHarness()
        try await expectFailure(.badSignature, h) { try other.dev.mintToken(user: "alice", nonce: $0) }
        try await expectFailure(.algorithmNotAllowed, h) { n in
            let token = try h.dev.mintToken(user: "alice", nonce: n)
            let parts = token.split(separator: ".")
            return Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + parts[1] + "."
        }
        try await expectFailure(.algorithmNotAllowed, h) {
            try h.dev.sign(header: ["alg": "HS256", "typ": "JWT"], claims: claims($0))
        }
        try await expectFailure(.algorithmNotAllowed, h) {
            try h.dev.sign(header: ["alg": "RS256", "typ": "JWT"], claims: claims($0))
        }
        let now = Int64(Date().timeIntervalSince1970)
        try await expectFailure(.tokenExpired, h) {
            try h.dev.sign(header: DevIdentityProvider.header, claims: claims($0, iat: now - 7200, exp: now - 3600))
        }
        try await expectFailure(.tokenNotYetValid, h) {
            try h.dev.sign(header: DevIdentityProvider.header, claims: claims($0, iat: now + 3600, exp: now + 7200))
        }
        try await expectFailure(.unknownProvider, h) {
            try h.dev.sign(header: DevIdentityProvider.header, claims: claims($0, iss: "elsewhere"))
        }
        try await expectFailure(.unknownNonce, h) { _ in try h.dev.mintToken(user: "alice", nonce: "never-issued") }
        try await expectFailure(.malformedToken, h) { _ in "not.a-jwt" }
        // A system sender's reserved id (SPEC §3.9) is no user's.
        try await expectFailure(.malformedToken, h) { try h.dev.mintToken(user: "layer:///system/Admin", nonce: $0) }
        try await expectFailure(.malformedToken, h) { _ in String(repeating: "a", count: 9000) }
        try await expectFailure(.malformedToken, h) {
            try h.dev.sign(
                header: DevIdentityProvider.header, claims: ["iss": DevIdentityProvider.providerID, "nce": $0])
        }
        await other.close()
        await h.close()
    }

    /// SPEC §5.2: `kid`, `typ` and `cty` are informational; `iat`/`exp` are seconds (fractions
    /// allowed) checked with a 60 s skew (30 s inside it is accepted, 90 s outside refused); `sub` stands in for `prn`; an ES256 signature is
    /// the 64 raw bytes r || s.
    @Test func tokenRulesOfTheText() async throws {
        let h = try EngineHarness()
        // Each token is minted just before it is sent, with margins for a loaded machine.
        var now: Double { Date().timeIntervalSince1970 }
        func accepted(_ token: @escaping (String) throws -> String) async throws -> Bool {
            let (reply, _) = try await authenticate(h, token: token)
            if case .authenticated = reply { return true }
            return false
        }
        #expect(
            try await accepted {
                try h.dev.sign(header: ["alg": "ES256", "kid": "any-key-id"], claims: self.claims($0))
            })
        #expect(try await accepted { try h.dev.sign(header: ["alg": "ES256"], claims: self.claims($0)) })
        #expect(
            try await accepted { n in
                try h.dev.sign(
                    header: DevIdentityProvider.header,
                    claims: [
                        "iss": DevIdentityProvider.providerID, "sub": "alice", "nce": n, "iat": now + 30.5,
                        "exp": now - 30.25,
                    ])
            })
        try await expectFailure(.tokenExpired, h) { n in
            try h.dev.sign(
                header: DevIdentityProvider.header,
                claims: [
                    "iss": DevIdentityProvider.providerID, "prn": "alice", "nce": n, "iat": now - 600, "exp": now - 90,
                ])
        }
        try await expectFailure(.tokenNotYetValid, h) { n in
            try h.dev.sign(
                header: DevIdentityProvider.header,
                claims: [
                    "iss": DevIdentityProvider.providerID, "prn": "alice", "nce": n, "iat": now + 90, "exp": now + 600,
                ])
        }
        // The same signature DER-encoded (r and s as ASN.1 INTEGERs) is refused.
        try await expectFailure(.badSignature, h) { n in
            let token = try h.dev.mintToken(user: "alice", nonce: n)
            let parts = token.split(separator: ".").map(String.init)
            let raw = try #require(Base64URL.decode(Substring(parts[2])))
            func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
                var b = Array(bytes.drop { $0 == 0 })
                if b.first.map({ $0 >= 0x80 }) ?? true { b.insert(0, at: 0) }
                return [0x02, UInt8(b.count)] + b
            }
            let body = integer(raw[0..<32]) + integer(raw[32..<64])
            return parts[0] + "." + parts[1] + "." + Base64URL.encode([0x30, UInt8(body.count)] + body)
        }
        await h.close()
    }

    @Test func reusedAndExpiredNonces() async throws {
        let h = try EngineHarness()
        var used = ""
        let (first, _) = try await authenticate(h) {
            used = $0
            return try h.dev.mintToken(user: "alice", nonce: $0)
        }
        guard case .authenticated = first else {
            Issue.record("got \(first)")
            return
        }
        try await expectFailure(.nonceReused, h) { _ in try h.dev.mintToken(user: "alice", nonce: used) }
        // A nonce of this session's issued an hour ago (in the table until the pruner's run).
        let late = try await h.open()
        let past = Timestamp(millisecondsSince1970: Timestamp.now().millisecondsSince1970 - 3_600_000)
        let old = try h.engine.nonces.issue(to: late.session.connection, now: past).get().nonce
        late.session.receive(
            .authenticate(
                Authenticate(
                    requestID: UUID(), identityToken: try h.dev.mintToken(user: "alice", nonce: old), deviceID: UUID()))
        )
        #expect(try await late.outbound.expectNext().errorFrame?.code == .nonceExpired)
        #expect(h.engine.nonces.prune() == 1)
        await h.close()
    }

    /// A nonce is good on the connection (here: the session) that asked for it only; a
    /// failed login uses its nonce up; a failure is followed by a fresh nonce that works.
    @Test func aNonceIsTiedToItsConnectionAndAFailedLoginUsesItUp() async throws {
        let h = try EngineHarness()
        let asker = try await h.open()
        let foreign = try await h.nonce(asker)
        let other = try await h.open()
        _ = try await h.nonce(other)
        other.session.receive(
            .authenticate(
                Authenticate(
                    requestID: UUID(), identityToken: try h.dev.mintToken(user: "alice", nonce: foreign),
                    deviceID: UUID())))
        #expect(try await other.outbound.expectNext().errorFrame?.code == .nonceOtherConnection)
        guard case .nonce(let fresh) = try await other.outbound.expectNext() else {
            Issue.record("no fresh nonce")
            return
        }
        // Left as it was for its own connection... which now fails a login (bad signature):
        let stranger = try EngineHarness()
        asker.session.receive(
            .authenticate(
                Authenticate(
                    requestID: UUID(), identityToken: try stranger.dev.mintToken(user: "alice", nonce: foreign),
                    deviceID: UUID())))
        #expect(try await asker.outbound.expectNext().errorFrame?.code == .badSignature)
        guard case .nonce = try await asker.outbound.expectNext() else {
            Issue.record("no fresh nonce")
            return
        }
        // ...and that used it up: the right token for it is too late.
        asker.session.receive(
            .authenticate(
                Authenticate(
                    requestID: UUID(), identityToken: try h.dev.mintToken(user: "alice", nonce: foreign),
                    deviceID: UUID())))
        #expect(try await asker.outbound.expectNext().errorFrame?.code == .nonceReused)
        // The fresh nonce after the failure authenticates its own session.
        other.session.receive(
            .authenticate(
                Authenticate(
                    requestID: UUID(), identityToken: try h.dev.mintToken(user: "alice", nonce: fresh.nonce),
                    deviceID: UUID())))
        guard case .authenticated = try await other.outbound.expectNext() else {
            Issue.record("the fresh nonce did not authenticate")
            return
        }
        await stranger.close()
        await h.close()
    }

    @Test func resumeSessionAndRevocation() async throws {
        let h = try EngineHarness()
        let device = UUID()
        let first = try await h.connect("alice", device: device)
        let second = try await h.open()
        second.session.receive(
            .resumeSession(ResumeSession(requestID: UUID(), sessionToken: first.sessionToken, deviceID: device)))
        guard case .authenticated(let a) = try await second.outbound.expectNext() else {
            Issue.record("resume failed")
            return
        }
        #expect(a.identity.userID == "alice")
        #expect(second.session.user == "alice")

        #expect(try await h.engine.revokeSession(token: first.sessionToken))
        #expect(try await first.outbound.expectNext().errorFrame?.code == .sessionRevoked)
        #expect(first.outbound.isClosed)
        let third = try await h.open()
        third.session.receive(
            .resumeSession(ResumeSession(requestID: UUID(), sessionToken: first.sessionToken, deviceID: device)))
        #expect(try await third.outbound.expectNext().errorFrame?.code == .sessionRevoked)
        guard case .nonce = try await third.outbound.expectNext() else {
            Issue.record("no nonce after revoked")
            return
        }
        #expect(third.session.user == nil)
        await h.close()
    }

    @Test func endSessionRevokesTheSessionAndEndsItsStreams() async throws {
        let h = try EngineHarness()
        let device = UUID()
        let first = try await h.connect("alice", device: device)
        let second = try await h.open()
        second.session.receive(
            .resumeSession(ResumeSession(requestID: UUID(), sessionToken: first.sessionToken, deviceID: device)))
        guard case .authenticated = try await second.outbound.expectNext() else {
            Issue.record("resume failed")
            return
        }
        // Another session of the same user is not touched.
        let other = try await h.connect("alice", device: UUID())

        let id = UUID()
        first.session.receive(.endSession(EndSession(requestID: id)))
        guard case .ack(let ack) = try await first.outbound.expectNext() else {
            Issue.record("END_SESSION not acknowledged")
            return
        }
        #expect(ack == Ack(requestID: id))
        #expect(await first.outbound.next(timeout: .seconds(1)) == nil)
        #expect(first.outbound.closedWith == .some(nil))  // ended without an ERROR
        #expect(try await second.outbound.expectNext().errorFrame?.code == .sessionRevoked)
        #expect(second.outbound.isClosed)
        #expect(!other.outbound.isClosed)

        let third = try await h.open()
        third.session.receive(
            .resumeSession(ResumeSession(requestID: UUID(), sessionToken: first.sessionToken, deviceID: device)))
        #expect(try await third.outbound.expectNext().errorFrame?.code == .sessionRevoked)
        await h.close()
    }

    @Test func endSessionBeforeAuthenticationIsRefused() async throws {
        let h = try EngineHarness()
        let client = try await h.open()
        let id = UUID()
        client.session.receive(.endSession(EndSession(requestID: id)))
        let error = try await client.outbound.expectNext().errorFrame
        #expect(error?.code == .authenticationRequired)
        #expect(error?.requestID == id)
        #expect(error?.isFatal == false)
        await h.close()
    }

    @Test func expiredSessionCannotResume() async throws {
        let h = try EngineHarness()
        let token = "expired-session-token"
        let hash = try SHA256Hasher.hash(Array(token.utf8))
        let now = Timestamp.now().millisecondsSince1970
        let device = UUID()
        let record = SessionRecord(
            tokenHash: hash, user: "alice", device: device.uuidString.lowercased(),
            createdAt: Timestamp(millisecondsSince1970: now - 7_200_000),
            expiresAt: Timestamp(millisecondsSince1970: now - 3_600_000))
        try await h.store.write { tx in try tx.createSession(record) }
        let client = try await h.open()
        client.session.receive(.resumeSession(ResumeSession(requestID: UUID(), sessionToken: token, deviceID: device)))
        #expect(try await client.outbound.expectNext().errorFrame?.code == .sessionExpired)
        guard case .nonce = try await client.outbound.expectNext() else {
            Issue.record("no nonce after expired")
            return
        }
        #expect(client.session.user == nil)
        await h.close()
    }

    @Test func devProviderKeyPersists() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lamina-dev-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let a = try DevIdentityProvider.loadOrCreate(in: dir)
        let b = try DevIdentityProvider.loadOrCreate(in: dir)
        #expect(a.provider == b.provider)
        let attributes = try FileManager.default.attributesOfItem(
            atPath: dir.appendingPathComponent(DevIdentityProvider.privateKeyFile).path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }
}
