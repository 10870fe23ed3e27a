import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaStore
import LaminaWire
import Testing

/// `lastSeenAt` kept across restarts (SPEC §6.6): written in a batch after the user goes
/// offline (never per presence change), read back by the restarted node, sent to followers
/// as `offline` with that time, and shown on identities by the Client API and the Server API.
@Suite struct LastSeenTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    @Test func lastSeenSurvivesARestartAndShowsOnIdentities() async throws {
        let node = try await TestNode.start("last-seen-restart")
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        // Set once they share a conversation: in bob's feed, so a new device of his holds it.
        let api = CurlAPI(node.server, http: .http2)
        #expect(
            try await api.request("POST", "/users/alice/identity", json: #"{"display_name":"Alice"}"#).status == 201)
        let bob = try await node.session(Self.bob, device: UUID(), features: .withPresence)
        let online = try await bob.presence(of: Self.alice, .available)

        // Status changes write nothing; alice leaving writes her time once, in a batch.
        let engine = node.server.engine
        let writtenBefore = engine.lastSeenWrites
        try await alice.choose(.away)
        _ = try await bob.presence(of: Self.alice, .away, after: online)
        try await alice.choose(.busy)
        let busy = try await bob.presence(of: Self.alice, .busy)
        #expect(engine.lastSeenWrites == writtenBefore, "presence changes wrote last-seen rows")
        await alice.close()
        let gone = try await bob.presence(of: Self.alice, .offline, after: busy)
        let seen = try #require(gone.lastSeenAt)
        try await ResourceLimitTests.eventuallyAsync("alice's last-seen time written") {
            (try? await node.server.store.read { r in try r.lastSeen(of: [Self.alice]) })?[Self.alice] == seen
                && engine.lastSeenWrites.rows > writtenBefore.rows
        }
        #expect(engine.lastSeenWrites.rows == writtenBefore.rows + 1, "one row: alice's")
        await bob.close()

        // A restarted node knows nothing of alice in memory: the stored time is what it sends.
        try await node.restart()
        let again = try await node.session(Self.bob, device: UUID(), features: .withPresence)
        let after = try await again.presence(of: Self.alice, .offline)
        #expect(after.lastSeenAt == seen)

        // Identities show it: the Client API (Layer's `presence` of an identity) and the Server API.
        let client = try await ClientAPICurl.session(Self.bob, on: node, http: .http2)
        let shown = try await client.request("GET", "/identities/alice")
        #expect(shown.status == 200, "\(shown.body)")
        let presence = try #require(shown.object["presence"] as? [String: Any], "\(shown.body)")
        #expect(presence["status"] as? String == "offline")
        #expect(Self.milliseconds(presence["last_seen_at"]) == seen.millisecondsSince1970, "\(shown.body)")
        let listed = try await client.request("GET", "/identities")
        let listedAlice = listed.array.first { $0["user_id"] as? String == "alice" }
        #expect(
            Self.milliseconds((listedAlice?["presence"] as? [String: Any])?["last_seen_at"])
                == seen.millisecondsSince1970, "\(listed.body)")
        let server = try await CurlAPI(node.server, http: .http1).request("GET", "/users/alice/identity")
        #expect(server.status == 200, "\(server.body)")
        let serverPresence = server.object["presence"] as? [String: Any]
        #expect(serverPresence?["status"] as? String == "offline", "\(server.body)")
        #expect(Self.milliseconds(serverPresence?["last_seen_at"]) == seen.millisecondsSince1970, "\(server.body)")
        // Bob, online, is shown available without a last-seen time.
        let bobShown = try await client.request("GET", "/identities/bob")
        #expect((bobShown.object["presence"] as? [String: Any])?["status"] as? String == "available")

        // And the SDK: a new device of bob's shows it on alice's identity.
        let sdk = try ClientHarness.device(Self.bob, on: node)
        _ = try await ClientHarness.connectLive(sdk, on: node)
        // Presence is no object change (nothing wakes a store wait): polled.
        try await ResourceLimitTests.eventually("alice's identity with her last-seen time at bob's SDK") {
            (try? sdk.identity(of: Self.alice))??.lastSeenAt == seen
        }
        #expect(try sdk.identity(of: Self.alice)?.presence?.status == .offline)
        #expect(try sdk.identities().first { $0.userID == Self.alice }?.lastSeenAt == seen)
        try await sdk.close()

        await again.close()
        await node.stop()
    }

    @Test func aGracefulStopWritesTheTimeOfEveryoneStillOnline() async throws {
        let node = try await TestNode.start("last-seen-stop")
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        let before = Timestamp.now()
        // Alice is still connected when the node stops: her session ends with the node, and the
        // time is written before the store closes (no flush interval to wait for).
        try await node.restart()
        let seen = try #require(
            try await node.server.store.read { r in try r.lastSeen(of: [Self.alice]) }[Self.alice])
        #expect(seen >= before && seen <= Timestamp.now())
        await alice.close()
        await node.stop()
    }

    /// Milliseconds since 1970 of an ISO 8601 date with fractional seconds.
    static func milliseconds(_ value: Any?) -> Int64? {
        guard let text = value as? String,
            let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        else { return nil }
        return Int64((date.timeIntervalSince1970 * 1_000).rounded())  // nearest: .851 s parses as 850.9998 ms
    }
}
