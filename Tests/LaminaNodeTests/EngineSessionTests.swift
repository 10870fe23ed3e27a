import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaNode

@Suite struct EngineSessionTests {
    @Test func helloIsAnsweredWithWelcomeAndCommonFeatures() async throws {
        let h = try EngineHarness()
        let outbound = RecordingOutbound()
        let session = h.engine.openSession(outbound: outbound)
        session.receive(
            .hello(
                Hello(
                    minVersion: 1, maxVersion: 3, features: [.changeBatches, FeatureSet(rawValue: 1 << 40)], agent: "t")
            ))
        guard case .welcome(let w) = try await outbound.expectNext() else {
            Issue.record("no welcome")
            return
        }
        #expect(w.version == 1)
        #expect(w.features == [.changeBatches])
        #expect(w.nodeID == NodeID(7))
        session.receive(.ping(Ping(payload: 42)))
        #expect(try await outbound.expectNext() == .pong(Ping(payload: 42)))
        await h.close()
    }

    @Test func unsupportedVersionIsFatal() async throws {
        let h = try EngineHarness()
        let outbound = RecordingOutbound()
        let session = h.engine.openSession(outbound: outbound)
        session.receive(.hello(Hello(minVersion: 2, maxVersion: 5, agent: "future")))
        let error = try await outbound.expectNext().errorFrame
        #expect(error?.code == .unsupportedVersion)
        #expect(error?.isFatal == true)
        #expect(outbound.isClosed)
        await h.close()
    }

    @Test func firstFrameMustBeHello() async throws {
        let h = try EngineHarness()
        let outbound = RecordingOutbound()
        let session = h.engine.openSession(outbound: outbound)
        session.receive(.ping(Ping(payload: 1)))
        #expect(try await outbound.expectNext().errorFrame?.code == .unexpectedFrame)
        #expect(outbound.isClosed)
        await h.close()
    }

    @Test func commandsBeforeAuthenticationAreRefused() async throws {
        let h = try EngineHarness()
        let client = try await h.open()
        let id = ConversationID.random()
        client.session.receive(.createConversation(CreateConversation(conversationID: id, participants: ["bob"])))
        let error = try await client.outbound.expectNext().errorFrame
        #expect(error?.code == .authenticationRequired)
        #expect(error?.requestID == id.uuid)
        #expect(error?.isFatal == false)
        client.session.receive(.sync(SyncRequest(requestID: UUID(), cursor: 0)))
        #expect(try await client.outbound.expectNext().errorFrame?.code == .authenticationRequired)
        #expect(!client.outbound.isClosed)
        let stored = try await h.store.read { r in try r.conversation(id) }
        #expect(stored == nil)
        await h.close()
    }

    @Test func malformedFrameClosesOnlyThatSession() async throws {
        let h = try EngineHarness()
        let alice = try await h.connect("alice")
        let bob = try await h.connect("bob")
        alice.session.receiveFailed(WireError(.malformed, "bad bool"))
        let error = try await alice.outbound.expectNext().errorFrame
        #expect(error?.code == .malformed)
        #expect(error?.isFatal == true)
        #expect(error?.requestID == nil)
        #expect(alice.outbound.isClosed)
        bob.session.receive(.ping(Ping(payload: 9)))
        #expect(try await bob.outbound.expectNext() == .pong(Ping(payload: 9)))
        #expect(!bob.outbound.isClosed)
        await h.close()
    }

    @Test func peerFramesAreForbidden() async throws {
        let h = try EngineHarness()
        let client = try await h.open()
        client.session.receive(.versionVector(VersionVector()))
        #expect(try await client.outbound.expectNext().errorFrame?.code == .forbidden)
        #expect(client.outbound.isClosed)
        await h.close()
    }
}
