import Foundation
import LaminaClient
import LaminaModel
import LaminaWire
import Testing

/// Typing indicators end 6 s after the last one (SPEC §6.1), on a real node and in the SDK.
@Suite struct ClientSDKTypingTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    @Test func typingEndsSixSecondsAfterTheLastIndicator() async throws {
        let node = try await TestNode.start("sdk-typing-expiry")
        // Alice types from a raw session: one indicator, never refreshed, never finished.
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await MessagingTests.conversation(alice, with: [Self.bob])
        let (first, _) = try await MessagingTests.send(alice, conversation, "hi")
        // Bob has a raw device (what the node relays) and an SDK device (what the app sees).
        let bobRaw = try await node.session(Self.bob, device: UUID())
        let bob = try ClientHarness.device(Self.bob, on: node)
        let bobEvents = try await ClientHarness.connectLive(bob, on: node)
        _ = try await bob.waitForCreation(of: first, timeout: .seconds(60))

        let started = TypingChanged(conversationID: conversation, user: Self.alice, state: .started)
        let finished = TypingChanged(conversationID: conversation, user: Self.alice, state: .finished)
        let clock = ContinuousClock()
        let sentAt = clock.now
        alice.send(.typing(Typing(conversationID: conversation, state: .started)))
        try await bobEvents.wait("alice typing at bob's SDK") { $0.contains(.typing(started)) }
        #expect(bob.typingParticipants(in: conversation) == [Self.alice: .started])
        _ = try await bobRaw.change { $0.event == .typing(started) }

        // The node ends the indicator itself, no earlier than 6 s after it was sent.
        _ = try await bobRaw.change(where: { $0.event == .typing(finished) }, timeout: .seconds(20))
        let endedAfter = clock.now - sentAt
        #expect(endedAfter >= Typing.expiry)
        #expect(endedAfter < Typing.expiry + .seconds(10))
        try await bobEvents.wait("alice's indicator ended at bob's SDK", timeout: .seconds(20)) {
            $0.contains(.typing(finished))
        }
        #expect(clock.now - sentAt >= Typing.expiry)
        #expect(bob.typingParticipants(in: conversation).isEmpty)

        // A new indicator arrives behind the node's `finished` on bob's stream: once the SDK
        // reports it, the first indicator's end (the node's, or the SDK's own timer, whichever
        // came first) was reported exactly once.
        alice.send(.typing(Typing(conversationID: conversation, state: .paused)))
        let paused = TypingChanged(conversationID: conversation, user: Self.alice, state: .paused)
        try await bobEvents.wait("alice paused at bob's SDK") { $0.contains(.typing(paused)) }
        #expect(bobEvents.all.filter { $0 == .typing(finished) }.count == 1)
        #expect(bob.typingParticipants(in: conversation) == [Self.alice: .paused])
        // An explicit `finished` ends it at once.
        alice.send(.typing(Typing(conversationID: conversation, state: .finished)))
        _ = try await bobRaw.change { $0.event == .typing(paused) }
        try await bobEvents.wait("alice finished at bob's SDK", timeout: .seconds(5)) { events in
            events.filter { $0 == .typing(finished) }.count == 2
        }

        await alice.drop()
        await bobRaw.drop()
        try await bob.close()
        await node.stop()
    }
}
