import Foundation
import LaminaModel
import LaminaNode
import LaminaWire
import Testing

/// Real node, real engine, over TLS + HTTP/2 on loopback: sending, fan-out, catch-up,
/// retries and restarts.
@Suite struct MessagingTests {
    static let alice: UserID = "alice"
    static let bob: UserID = "bob"
    static let carol: UserID = "carol"

    static func text(_ s: String) -> [MessagePart] { [try! MessagePart(text: s)] }

    /// Alice creates a conversation with Bob (returns its id).
    static func conversation(_ client: SyncTestClient, with users: Set<UserID>) async throws -> ConversationID {
        let id = ConversationID.random()
        try await client.command(
            .createConversation(
                CreateConversation(
                    conversationID: id, participants: users, options: ConversationOptions(isDistinct: false))),
            id: id.uuid)
        return id
    }

    static func send(
        _ client: SyncTestClient, _ conversation: ConversationID, _ text: String, id: MessageID = .random(),
        parts: [MessagePart]? = nil
    ) async throws -> (MessageID, Ack) {
        let ack = try await client.command(
            .sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts ?? Self.text(text))),
            id: id.uuid)
        return (id, ack)
    }

    @Test(arguments: StoreBackend.allCases) func twoUsersWithSeveralDevicesSendAndReceive(_ backend: StoreBackend)
        async throws
    {
        let node = try await TestNode.start("fanout", backend: backend)
        let a1 = try await node.session(Self.alice, device: UUID())
        let a2 = try await node.session(Self.alice, device: UUID())
        let b1 = try await node.session(Self.bob, device: UUID())
        let b2 = try await node.session(Self.bob, device: UUID())

        let conversation = try await Self.conversation(a1, with: [Self.alice, Self.bob])
        let (m1, ack1) = try await Self.send(a1, conversation, "hi bob")
        #expect(ack1.position != nil)
        for device in [a2, b1, b2] {
            let message = try await device.message(m1)
            #expect(message.sender == Self.alice)
            #expect(message.parts.map(\.content) == [.inline(Array("hi bob".utf8))])
        }
        let (m2, _) = try await Self.send(b2, conversation, "hi alice")
        for device in [a1, a2, b1] {
            #expect(try await device.message(m2).sender == Self.bob)
        }
        for c in [a1, a2, b1, b2] { await c.close() }
        await node.stop()
    }

    @Test(arguments: StoreBackend.allCases) func offlineDeviceCatchesUpFromItsCursor(_ backend: StoreBackend)
        async throws
    {
        let node = try await TestNode.start("catchup", backend: backend)
        let bobDevice = UUID()
        let bob = try await node.session(Self.bob, device: bobDevice)
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await Self.conversation(alice, with: [Self.alice, Self.bob])
        let (first, _) = try await Self.send(alice, conversation, "before")
        let seen = try await bob.change {
            if case .messageCreated(let m) = $0.event { return m.id == first }
            return false
        }
        await bob.close()

        var sent: [MessageID] = []
        for i in 0..<5 { sent.append(try await Self.send(alice, conversation, "while away \(i)").0) }

        let back = try await node.connect()
        _ = try await back.hello()
        _ = try await back.authenticate(user: Self.bob, device: bobDevice, dev: node.dev)
        let (backlog, _) = try await back.sync(from: seen.seq)
        let received = backlog.compactMap { change -> MessageID? in
            if case .messageCreated(let m) = change.event { return m.id }
            return nil
        }
        #expect(received == sent)
        #expect(backlog.allSatisfy { $0.seq > seen.seq })
        await back.close()
        await alice.close()
        await node.stop()
    }

    @Test(arguments: StoreBackend.allCases) func retryAfterADroppedConnectionMakesNoDuplicate(_ backend: StoreBackend)
        async throws
    {
        let node = try await TestNode.start("retry", backend: backend)
        let aliceDevice = UUID()
        let alice = try await node.session(Self.alice, device: aliceDevice)
        let conversation = try await Self.conversation(alice, with: [Self.alice, Self.bob])
        let id = MessageID.random()
        let parts = Self.text("once")  // a retry resends the very same command (part ids included)
        // Send and drop at once: the ACK may or may not have been produced.
        alice.send(.sendMessage(SendMessage(messageID: id, conversationID: conversation, parts: parts)))
        await alice.drop()

        let again = try await node.session(Self.alice, device: aliceDevice)
        let (_, first) = try await Self.send(again, conversation, "once", id: id, parts: parts)
        let (_, second) = try await Self.send(again, conversation, "once", id: id, parts: parts)
        #expect(first.position == second.position)
        // Changing the content under the same id is refused.
        await #expect(throws: CommandFailed.self) { try await Self.send(again, conversation, "different", id: id) }

        let bob = try await node.connect()
        _ = try await bob.hello()
        _ = try await bob.authenticate(user: Self.bob, device: UUID(), dev: node.dev)
        let (backlog, _) = try await bob.sync(from: 0)
        let copies = backlog.filter {
            if case .messageCreated(let m) = $0.event { return m.id == id }
            return false
        }
        #expect(copies.count == 1)
        await again.close()
        await bob.close()
        await node.stop()
    }

    @Test(arguments: StoreBackend.allCases) func restartLosesNothingAcknowledged(_ backend: StoreBackend) async throws {
        let node = try await TestNode.start("restart", backend: backend)
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await Self.conversation(alice, with: [Self.alice, Self.bob])
        var acknowledged: [MessageID] = []
        for i in 0..<20 { acknowledged.append(try await Self.send(alice, conversation, "m\(i)").0) }
        await alice.close()

        try await node.restart()
        let bob = try await node.connect()
        _ = try await bob.hello()
        _ = try await bob.authenticate(user: Self.bob, device: UUID(), dev: node.dev)
        let (backlog, _) = try await bob.sync(from: 0)
        let present = backlog.compactMap { change -> MessageID? in
            if case .messageCreated(let m) = change.event { return m.id }
            return nil
        }
        #expect(present == acknowledged)
        await bob.close()
        await node.stop()
    }

    @Test func malformedAndOversizedFramesEndOnlyTheirStream() async throws {
        let node = try await TestNode.start("malformed") { $0.limits.maxFrameSize = 64 * 1024 }
        let alice = try await node.session(Self.alice, device: UUID())
        let conversation = try await Self.conversation(alice, with: [Self.alice, Self.bob])

        let malformed = try await node.connect()
        _ = try await malformed.hello()
        // A PING whose payload is 3 bytes instead of 8.
        malformed.sendRaw([0, 0, 0, 3, 0, 8, 0, 0, 1, 2, 3])
        let malformedFrames = try await malformed.framesUntilEnd()
        #expect(Self.fatalCodes(malformedFrames).count == 1)

        let oversized = try await node.connect()
        _ = try await oversized.hello()
        // SEND_MESSAGE header declaring 1 MiB, over the node's 64 KiB.
        oversized.sendRaw([0x00, 0x10, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00])
        let oversizedFrames = try await oversized.framesUntilEnd()
        #expect(Self.fatalCodes(oversizedFrames) == [.frameTooLarge])

        // The other session keeps working.
        _ = try await Self.send(alice, conversation, "still here")
        await malformed.close()
        await oversized.close()
        await alice.close()
        await node.stop()
    }

    static func fatalCodes(_ frames: [Frame]) -> [WireError.Code] {
        frames.compactMap { if case .error(let e) = $0, e.isFatal { return e.code } else { return nil } }
    }
}
