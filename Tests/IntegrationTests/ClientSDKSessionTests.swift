import Foundation
import LaminaClient
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Session-level behaviour of the SDK against a real node: the node ending a session and
/// asking for authentication again, WELCOME's frame size limit, and conversation updates
/// arriving as change notifications.
@Suite struct ClientSDKSessionTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"

    static func count(_ events: [SyncEngine.Event], _ wanted: (SyncEngine.Event) -> Bool) -> Int {
        events.filter(wanted).count
    }
    static func isAuthenticated(_ e: SyncEngine.Event) -> Bool { if case .authenticated = e { true } else { false } }

    @Test func aSessionTheNodeEndsAsksTheAppForANewIdentityToken() async throws {
        let node = try await TestNode.start("sdk-session")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        let tokens = Counter()
        let events = try await ClientHarness.connectLive(alice, on: node, tokens: tokens)
        try await ClientHarness.connect(bob, on: node)
        #expect(tokens.value == 1)
        let first = try #require(try alice.store.sessionToken())

        // The node revokes the running session: it ends the stream; the SDK says so, asks
        // the app for a new token and carries on.
        #expect(try await node.server.engine.revokeSession(token: first))
        try await events.wait("re-authentication after the revocation") { all in
            all.contains(.sessionExpired) && Self.count(all, Self.isAuthenticated) == 2
        }
        #expect(tokens.value == 2)
        let second = try #require(try alice.store.sessionToken())
        #expect(second != first)

        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let message = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "still here")]), in: conversation)
            .id
        _ = try await bob.waitForCreation(of: message, timeout: .seconds(60))

        // Offline, the session is revoked too: resuming is refused, the app is asked again.
        await alice.disconnect()
        #expect(try await node.server.engine.revokeSession(token: second))
        try await ClientHarness.connect(alice, on: node, tokens: tokens)
        try await events.wait("re-authentication after a refused resume") { all in
            Self.count(all, { $0 == .sessionExpired }) == 2 && Self.count(all, Self.isAuthenticated) == 3
        }
        #expect(tokens.value == 3)
        #expect(try alice.store.sessionToken() != second)
        #expect(alice.authenticatedUser?.userID == Self.alice)

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func aReconnectResumesTheSessionWithoutAskingTheApp() async throws {
        let node = try await TestNode.start("sdk-resume")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let tokens = Counter()
        let events = try await ClientHarness.connectLive(alice, on: node, tokens: tokens)
        await alice.disconnect()
        try await ClientHarness.connect(alice, on: node, tokens: tokens)
        try await events.wait("the second session") { Self.count($0, Self.isAuthenticated) == 2 }
        #expect(tokens.value == 1)
        #expect(!events.all.contains(.sessionExpired))
        #expect(events.all.contains(.state(.resuming)))
        try await alice.close()
        await node.stop()
    }

    @Test func aCommandLargerThanTheNodesFrameLimitFailsAloneAndTheStreamCarriesOn() async throws {
        let node = try await TestNode.start("sdk-framesize") { $0.limits.maxFrameSize = 4_096 }
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        let events = try await ClientHarness.connectLive(alice, on: node)
        try await ClientHarness.connect(bob, on: node)

        let conversation = try alice.newConversation(participants: [Self.bob]).id
        let chunk = String(repeating: "x", count: 2_000)
        let big = try alice.send(
            alice.newMessage(parts: (0..<3).map { _ in try MessagePart.with(text: chunk) }), in: conversation
        ).id
        let small = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "fits")]), in: conversation).id

        _ = try await bob.waitForCreation(of: small, timeout: .seconds(60))
        try await ClientHarness.waitUntil(alice, "the small message sent") { try alice.isSent(small) }
        let failure = try #require(try alice.sendFailure(of: big))
        #expect(failure.code == WireError.Code.frameTooLarge.wireValue)
        #expect(try alice.isSent(big) == false)
        #expect(try bob.message(big) == nil)
        try await events.wait("the failure event") {
            $0.contains { if case .commandFailed(let f) = $0 { f.id == big.uuid } else { false } }
        }
        // The node never had to close the stream: one session, no reconnect.
        #expect(Self.count(events.all, Self.isAuthenticated) == 1)
        #expect(!events.all.contains { if case .reconnecting = $0 { true } else { false } })

        try await alice.close()
        try await bob.close()
        await node.stop()
    }

    @Test func metadataAndParticipantUpdatesArriveAsChangesWithBeforeAndAfter() async throws {
        let node = try await TestNode.start("sdk-updates")
        let alice = try ClientHarness.device(Self.alice, on: node)
        let bob = try ClientHarness.device(Self.bob, on: node)
        try await ClientHarness.connect(alice, on: node)
        try await ClientHarness.connect(bob, on: node)

        let conversation = try alice.newConversation(
            participants: [Self.bob], options: ConversationOptions(isDistinct: false)
        ).id
        let first = try alice.send(alice.newMessage(parts: [MessagePart.with(text: "hi")]), in: conversation).id
        _ = try await bob.waitForCreation(of: first, timeout: .seconds(60))

        let changes = Recorder(bob.changes())
        let title = try MetadataKeyPath(parsing: "title")
        try alice.setMetadata(.string("Lunch"), at: title, in: conversation)
        try await changes.wait("the metadata change at bob") { batches in
            batches.joined().contains {
                $0.type == .update && $0.property == ConversationProperty.metadata
                    && $0.before == .metadata(Metadata()) && $0.after == .metadata(["title": .string("Lunch")])
            }
        }
        try alice.deleteMetadata(at: title, in: conversation)
        try await changes.wait("the metadata deletion at bob") { batches in
            batches.joined().contains {
                $0.property == ConversationProperty.metadata
                    && $0.before == .metadata(["title": .string("Lunch")]) && $0.after == .metadata(Metadata())
            }
        }
        try alice.addParticipants(["carol"], to: conversation)
        try await changes.wait("the participants change at bob") { batches in
            batches.joined().contains {
                $0.property == ConversationProperty.participants
                    && $0.before == .participants([Self.alice, Self.bob])
                    && $0.after == .participants([Self.alice, Self.bob, "carol"])
            }
        }
        #expect(try bob.conversation(conversation)?.conversation.metadata == Metadata())

        try await alice.close()
        try await bob.close()
        await node.stop()
    }
}
