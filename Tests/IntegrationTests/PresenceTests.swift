import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import NIOCore
import Testing

/// Presence (SPEC §6.6) on a real node over TLS + HTTP/2: followers (users sharing a
/// conversation) see a user's status and nobody else does; `invisible` shows `offline` to
/// others; the last device leaving (cleanly, or a client that stops answering) is `offline`
/// with a last-seen time; a change that others cannot see is not sent to them.
@Suite struct PresenceTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    @Test func followersSeeStatusInvisibleAndLastSeenAndOthersSeeNothing() async throws {
        let node = try await TestNode.start("presence-followers")
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        // Bob shares a conversation with alice; carol shares none.
        let bob = try await node.session(Self.bob, device: UUID(), features: .withPresence)
        let carol = try await node.session(Self.carol, device: UUID(), features: .withPresence)
        // On authentication bob is told his own presence and alice's (online, chose nothing).
        _ = try await bob.presence(of: Self.bob, .available)
        _ = try await bob.presence(of: Self.alice, .available)
        _ = try await carol.presence(of: Self.carol, .available)

        try await alice.choose(.away)
        _ = try await bob.presence(of: Self.alice, .away)
        _ = try await alice.presence(of: Self.alice, .away)
        #expect(try await carol.presenceUpdatesThroughBarrier(of: Self.alice).isEmpty)

        // Invisible: bob sees offline with when alice was last seen; alice's devices see invisible.
        let beforeInvisible = Timestamp.now()
        try await alice.choose(.invisible)
        let hidden = try await bob.presence(of: Self.alice, .offline)
        let seen = try #require(hidden.lastSeenAt)
        #expect(seen >= beforeInvisible && seen <= Timestamp.now())
        _ = try await alice.presence(of: Self.alice, .invisible)

        // Visible again as busy; a second busy changes nothing and sends nothing.
        try await alice.choose(.busy)
        _ = try await bob.presence(of: Self.alice, .busy)
        try await alice.choose(.busy)
        #expect(try await bob.presenceUpdatesThroughBarrier(of: Self.alice).isEmpty, "a choice that changes nothing")
        // Offline is not a choice.
        do {
            try await alice.choose(.offline)
            Issue.record("SET_PRESENCE offline was accepted")
        } catch let failed as CommandFailed {
            #expect(failed.error.code == .invalidArgument)
        }

        // Alice's only device leaves cleanly: bob sees offline, last seen then.
        let beforeLeaving = Timestamp.now()
        await alice.close()
        let gone = try await bob.presence(of: Self.alice, .offline, after: hidden)
        let lastSeen = try #require(gone.lastSeenAt)
        #expect(lastSeen >= beforeLeaving && lastSeen <= Timestamp.now())
        #expect(try await carol.presenceUpdatesThroughBarrier(of: Self.alice).isEmpty)
        #expect(node.server.engine.presenceCounts.followerUpdates.load(ordering: .relaxed) >= 5)

        // A device of alice's that comes back has her last choice (the node keeps it while it runs).
        let again = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await bob.presence(of: Self.alice, .busy, after: gone)
        _ = try await again.presence(of: Self.alice, .busy)
        await again.close()
        await bob.close()
        await carol.close()
        await node.stop()
    }

    @Test func aUserIsOnlineUntilTheirLastDeviceLeaves() async throws {
        let node = try await TestNode.start("presence-devices")
        let phone = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(phone, with: [Self.bob])
        let bob = try await node.session(Self.bob, device: UUID(), features: .withPresence)
        let online = try await bob.presence(of: Self.alice, .available)
        let laptop = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        // The laptop's choice is the user's: the phone is told too.
        try await laptop.choose(.busy)
        _ = try await phone.presence(of: Self.alice, .busy)
        let busy = try await bob.presence(of: Self.alice, .busy, after: online)
        await laptop.close()
        try await ResourceLimitTests.eventually("the node to end the laptop's session") {
            node.server.sessionCount == 2
        }
        // One device left: bob is told nothing (alice is still busy).
        #expect(try await bob.presenceUpdatesThroughBarrier(of: Self.alice).isEmpty)
        await phone.close()
        _ = try await bob.presence(of: Self.alice, .offline, after: busy)
        await bob.close()
        await node.stop()
    }

    @Test func aClientThatStopsAnsweringGoesOfflineWithinTheLivenessBound() async throws {
        let node = try await TestNode.start("presence-vanished") {
            $0.resources.clientPingAfterQuietSeconds = 1
            $0.resources.clientPingDeadlineSeconds = 1
        }
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        let bob = try await node.session(Self.bob, device: UUID(), features: .withPresence)
        let online = try await bob.presence(of: Self.alice, .available)
        // Alice's device vanishes: no close, no reset; it just stops answering.
        let stopped = ContinuousClock.now
        try await alice.connection.setReading(false)
        let gone = try await bob.presence(of: Self.alice, .offline, after: online, timeout: .seconds(20))
        let after = ContinuousClock.now - stopped
        #expect(gone.lastSeenAt != nil)
        // The bound is 2 s (PING after 1 s quiet, ACK within 1 s); a loaded machine gets slack.
        #expect(after < .seconds(10), "offline \(after) after the client stopped answering")
        print("presence: a vanished client was offline to its followers \(after) after it stopped answering")
        await alice.close()
        await bob.close()
        await node.stop()
    }

    @Test func aNewlySharedConversationBringsPresenceAtOnce() async throws {
        let node = try await TestNode.start("presence-new-conversation")
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        let bob = try await node.session(Self.bob, device: UUID(), features: .withPresence)
        try await alice.choose(.away)
        #expect(try await bob.presenceUpdatesThroughBarrier(of: Self.alice).isEmpty, "not followed yet")
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        // Bob's devices learn the conversation with its first message (SPEC §6.2).
        _ = try await MessagingTests.send(alice, conversation, "hi")
        // Both now follow each other: bob learns alice is away, alice that bob is available.
        _ = try await bob.presence(of: Self.alice, .away)
        _ = try await alice.presence(of: Self.bob, .available)
        try await alice.choose(.busy)
        _ = try await bob.presence(of: Self.alice, .busy)
        await alice.close()
        await bob.close()
        await node.stop()
    }

    @Test func aSessionWithoutThePresenceFeatureIsRefusedAndSentNothing() async throws {
        let node = try await TestNode.start("presence-feature")
        let alice = try await node.session(Self.alice, device: UUID(), features: .withPresence)
        _ = try await MessagingTests.conversation(alice, with: [Self.bob])
        let bob = try await node.connect()
        bob.send(.hello(Hello(features: FeatureSet.all.subtracting(.presence), agent: "no-presence")))
        _ = try await bob.nextFrame()
        _ = try await bob.authenticate(user: Self.bob, device: UUID(), dev: node.dev)
        _ = try await bob.sync(from: 0)
        try await alice.choose(.busy)
        #expect(try await bob.presenceUpdatesThroughBarrier(of: Self.alice).isEmpty)
        do {
            try await bob.choose(.away)
            Issue.record("SET_PRESENCE without bit 9 was accepted")
        } catch let failed as CommandFailed {
            #expect(failed.error.code == .forbidden)
        }
        // Bob's device still counts as connected: alice sees him.
        _ = try await alice.presence(of: Self.bob, .available)
        await alice.close()
        await bob.close()
        await node.stop()
    }
}

extension SyncTestClient {
    /// SET_PRESENCE, answered with ACK (or the ERROR thrown as ``CommandFailed``).
    func choose(_ status: PresenceStatus) async throws {
        let id = UUID()
        _ = try await command(.setPresence(SetPresence(requestID: id, status: status)), id: id)
    }

    /// The first `presence-changed` for `user` with `status` received after `previous` (the
    /// one that matched before, if any), waiting for it.
    func presence(
        of user: UserID, _ status: PresenceStatus, after previous: Presence? = nil, timeout: TimeAmount = .seconds(30)
    ) async throws -> Presence {
        var skipping = previous != nil
        var index = 0
        let change = try await change(
            where: { change in
                guard case .presenceChanged(let p) = change.event, p.user == user else { return false }
                defer { index += 1 }
                if skipping {
                    if p.presence == previous { skipping = false }
                    return false
                }
                return p.presence.status == status
            }, timeout: timeout)
        guard case .presenceChanged(let p) = change.event else {
            throw UnexpectedEvent(expected: "presence", got: .end)
        }
        return p.presence
    }

    /// The `presence-changed` frames for `user` that arrive before the answer to a PING sent
    /// now (the node relays presence through the session's inbox, in order with the PING), and
    /// forgets every presence change kept so far.
    func presenceUpdatesThroughBarrier(of user: UserID) async throws -> [PresenceChanged] {
        let payload = UInt64.random(in: 1...UInt64.max)
        send(.ping(Ping(payload: payload)))
        let frames = try await frames(until: { if case .pong(let p) = $0 { p.payload == payload } else { false } })
        for frame in frames { keep(frame) }
        let updates = frames.flatMap(Self.changes(in:)).compactMap { change -> PresenceChanged? in
            if case .presenceChanged(let p) = change.event, p.user == user { return p }
            return nil
        }
        return updates
    }
}

extension FeatureSet {
    /// What a client that shows presence offers (presence is not in ``FeatureSet/all``).
    static let withPresence = FeatureSet.all.union(.presence)
}
