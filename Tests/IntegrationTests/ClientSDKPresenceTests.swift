import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// The SDK's presence (SPEC §6.6) against a real node: `setPresence` reaches a follower's
/// SDK as a `.presence` event and `presence(of:)`, the user's own devices see `invisible`
/// while followers see `offline`, and a reconnecting client sends its choice again.
@Suite struct ClientSDKPresenceTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    @Test func setPresenceReachesFollowersAndSurvivesAReconnect() async throws {
        let node = try await TestNode.start("sdk-presence")
        let aliceRaw = try await node.session(Self.alice, device: UUID())
        _ = try await MessagingTests.conversation(aliceRaw, with: [Self.bob])
        await aliceRaw.close()
        try await ResourceLimitTests.eventually("alice's raw session to end") { node.server.sessionCount == 0 }

        let bob = try ClientHarness.device(Self.bob, on: node)
        let bobEvents = try await ClientHarness.connectLive(bob, on: node)
        let alice = try ClientHarness.device(Self.alice, on: node)
        let aliceEvents = try await ClientHarness.connectLive(alice, on: node)

        try await bobEvents.wait("alice available at bob's SDK") { _ in
            bob.presence(of: Self.alice)?.status == .available
        }
        try await alice.setPresence(.busy)
        try await bobEvents.wait("alice busy at bob's SDK") { events in
            events.contains(.presence(PresenceChanged(user: Self.alice, presence: Presence(status: .busy))))
        }
        #expect(bob.presence(of: Self.alice) == Presence(status: .busy))

        try await alice.setPresence(.invisible)
        try await aliceEvents.wait("alice sees herself invisible") { _ in
            alice.presence(of: Self.alice)?.status == .invisible
        }
        try await bobEvents.wait("alice offline at bob's SDK") { _ in bob.presence(of: Self.alice)?.status == .offline }
        #expect(bob.presence(of: Self.alice)?.lastSeenAt != nil)
        await #expect(throws: ClientError.self) { try await alice.setPresence(.offline) }

        // Alice's client reconnects: still invisible (the node keeps her choice while it runs,
        // and the SDK sends it again as the new session goes live), so bob never sees her available.
        await alice.disconnect()
        try await ResourceLimitTests.eventually("alice's session to end") { node.server.sessionCount == 1 }
        try await ClientHarness.connect(alice, on: node)
        try await aliceEvents.wait("alice's second session to be live") { events in
            events.filter { $0 == .state(.live) }.count >= 2
        }
        #expect(alice.presence(of: Self.alice)?.status == .invisible)
        try await alice.setPresence(.away)
        // The event, not only the state: the recorder may get it a moment after the state changed.
        try await bobEvents.wait("alice away at bob's SDK") { events in
            events.contains { event in
                if case .presence(let p) = event { return p.user == Self.alice && p.presence.status == .away }
                return false
            }
        }
        #expect(bob.presence(of: Self.alice)?.status == .away)
        let seenStatuses = bobEvents.all.compactMap { event -> PresenceStatus? in
            if case .presence(let p) = event, p.user == Self.alice { return p.presence.status }
            return nil
        }
        // After busy, bob saw alice offline (invisible, then her session gone) and then away, never
        // available (the reconnect did not show her for a moment).
        let lastBusy = try #require(seenStatuses.lastIndex(of: .busy))
        #expect(Array(seenStatuses[(lastBusy + 1)...]) == [.offline, .away], "\(seenStatuses)")
        try await alice.close()
        try await bob.close()
        await node.stop()
    }
}
