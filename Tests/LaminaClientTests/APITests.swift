import Foundation
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

/// A client of alice on no node at all (nothing connects): the API's local side.
func withClient<T>(_ body: (LaminaClient) async throws -> T) async throws -> T {
    try await withTemporaryDirectory { dir in
        let config = LaminaConfiguration(
            nodeURL: URL(string: "https://node.test")!,
            trust: .certificateAuthorities(dir.appendingPathComponent("ca.pem")), dataDirectory: dir)
        let client = try LaminaClient(configuration: config, user: alice)
        return try await body(client)
    }
}

func expectCode(_ code: ClientError.Code, _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation)
{
    #expect(sourceLocation: sourceLocation) { try body() } throws: { ($0 as? ClientError)?.code == code }
}

@Suite struct APITests {
    @Test func configurationIsValidated() throws {
        let dir = URL(fileURLWithPath: "/tmp")
        let ca = LaminaConfiguration.Trust.pinnedCertificate(URL(fileURLWithPath: "/tmp/n.pem"))
        expectCode(.invalidSetting) {
            try LaminaConfiguration(nodeURL: URL(string: "http://node.test")!, trust: ca, dataDirectory: dir).validate()
        }
        expectCode(.invalidSetting) {
            try LaminaConfiguration(
                nodeURL: URL(string: "https://node.test")!, trust: ca, dataDirectory: URL(string: "https://x")!
            ).validate()
        }
        expectCode(.invalidSetting) {
            try LaminaConfiguration(
                nodeURL: URL(string: "https://node.test")!, trust: ca, dataDirectory: dir, agent: ""
            ).validate()
        }
        expectCode(.invalidSetting) {
            try LaminaConfiguration(
                nodeURL: URL(string: "https://node.test")!, trust: ca, dataDirectory: dir,
                reconnect: ReconnectPolicy(jitter: 2)
            ).validate()
        }
        try LaminaConfiguration(nodeURL: URL(string: "https://node.test:7443")!, trust: ca, dataDirectory: dir)
            .validate()
    }

    @Test func newConversationAddsTheCreatorAndStaysLocalUntilItsFirstMessage() async throws {
        try await withClient { client in
            let c = try client.newConversation(
                participants: [bob, carol],
                options: ConversationOptions(isDistinct: true, metadata: ["title": .string("Plans")]))
            #expect(c.conversation.participants == [alice, bob, carol])
            #expect(c.conversation.creator == alice)
            #expect(c.conversation.isDistinct)
            #expect(c.isSynced == false)
            #expect(try client.store.outboxEntries().isEmpty)  // nothing queued before the first message
            // Distinct: the same participants resolve to it (the creator may be named or not).
            #expect(try client.newConversation(participants: [bob, carol]).id == c.id)
            #expect(try client.newConversation(participants: [alice, carol, bob]).id == c.id)
            // Not distinct: a new one each time.
            let topicA = try client.newConversation(
                participants: [bob, carol], options: ConversationOptions(isDistinct: false))
            let topicB = try client.newConversation(
                participants: [bob, carol], options: ConversationOptions(isDistinct: false))
            #expect(Set([c.id, topicA.id, topicB.id]).count == 3)
        }
    }

    @Test func newConversationValidationErrors() async throws {
        try await withClient { client in
            expectCode(.noParticipants) { _ = try client.newConversation(participants: []) }
            expectCode(.noParticipants) { _ = try client.newConversation(participants: [alice]) }
            let many = Set((0..<25).map { try! UserID("user-\($0)") })
            expectCode(.tooManyParticipants) { _ = try client.newConversation(participants: many) }  // 26 with receipts
            expectCode(.tooManyParticipants) {
                _ = try client.newConversation(
                    participants: many, options: ConversationOptions(deliveryReceiptsEnabled: false))
            }
            _ = try client.newConversation(participants: many, options: ConversationOptions(readReceiptsEnabled: false))
            let deep = try MetadataKeyPath(["a", "b", "c", "d", "e", "f", "g", "h"])
            var metadata = Metadata()
            metadata.set(.dictionary(["x": .string("y")]), at: deep)
            expectCode(.invalidMetadata) {
                _ = try client.newConversation(participants: [bob], options: ConversationOptions(metadata: metadata))
            }
        }
    }

    @Test func messagePartsAndMessagesAreValidated() async throws {
        try await withClient { client in
            expectCode(.invalidMIMEType) {
                _ = try MessagePart.with(mimeType: "text", data: Data("x".utf8), staging: client.staging)
            }
            expectCode(.invalidMIMEType) {
                _ = try MessagePart.with(mimeType: "text/ plain", data: Data("x".utf8), staging: client.staging)
            }
            expectCode(.invalidMIMEType) {
                _ = try MessagePart.with(
                    mimeType: String(repeating: "a", count: 250) + "/plain", data: Data(), staging: client.staging)
            }
            // Over 2 KiB: rich content, staged with its size and digest (ContentStagingTests).
            let rich = try MessagePart.with(mimeType: "image/png", data: Data(count: 2_049), staging: client.staging)
            guard case .external(let reference) = rich.content else {
                Issue.record("2,049 bytes must be rich content")
                return
            }
            #expect(reference.size == 2_049)
            #expect(client.staging.discard(reference.id))
            expectCode(.inlineTooLarge) { _ = try MessagePart.with(text: String(repeating: "é", count: 1_025)) }
            let png = try MessagePart.with(mimeType: "image/png", data: Data([1, 2, 3]), staging: client.staging)
            #expect(png.mimeType.rawValue == "image/png")
            #expect(png.inlineBytes == [1, 2, 3])
            expectCode(.noParts) { _ = try client.newMessage(parts: []) }
            let part = try MessagePart.with(text: "x")
            expectCode(.tooManyParts) {
                _ = try client.newMessage(
                    parts: (0..<1_001).map { _ in MessagePart(mimeType: .textPlain, content: .inline([1])) })
            }
            expectCode(.duplicatePart) { _ = try client.newMessage(parts: [part, part]) }
            expectCode(.invalidPushConfiguration) {
                _ = try client.newMessage(
                    parts: [part], push: PushConfiguration(alert: String(repeating: "a", count: 1_025)))
            }
            expectCode(.invalidPushConfiguration) {
                _ = try client.newMessage(
                    parts: [part],
                    push: PushConfiguration(data: Dictionary(uniqueKeysWithValues: (0..<33).map { ("k\($0)", "v") })))
            }
            let draft = try client.newMessage(
                parts: [part, try .with(text: "y")],
                push: PushConfiguration(alert: "New message", sound: "ping.aiff", title: "Alice"))
            #expect(draft.parts.count == 2)
            #expect(draft.push?.sound == "ping.aiff")
        }
    }

    @Test func sendStoresTheMessageAndItsCommandsInOrderExactlyOnce() async throws {
        try await withClient { client in
            let c = try client.newConversation(participants: [bob])
            let first = try client.newMessage(parts: [.with(text: "one")])
            let m = try client.send(first, in: c.id)
            #expect(m.message.sender == alice)
            #expect(m.message.isSent == false)
            #expect(try client.isSent(m.id) == false)
            #expect(m.message.recipientStatus == [alice: .read, bob: .pending])
            try client.send(first, in: c.id)  // the same draft again: nothing new
            let second = try client.send(try client.newMessage(parts: [.with(text: "two")]), in: c.id)
            let entries = try client.store.outboxEntries()
            #expect(entries.map(\.kind) == ["conversation.create", "message.send", "message.send"])
            #expect(entries.map(\.id) == [c.id.uuid, first.id.uuid, second.id.uuid])
            guard case .createConversation(let create) = try OutboxEncoder.frame(for: entries[0]) else {
                Issue.record("not a creation")
                return
            }
            #expect(create.participants == [bob])  // the sender is implicit on the wire too
            guard case .sendMessage(let send) = try OutboxEncoder.frame(for: entries[1]) else {
                Issue.record("not a send")
                return
            }
            #expect(send.parts == m.message.parts)
            #expect(try client.messages(in: c.id).map(\.id) == [m.id, second.id])
            expectCode(.notFound) { try client.send(try client.newMessage(parts: [.with(text: "x")]), in: .random()) }
            expectCode(.notFound) { _ = try client.isSent(.random()) }
        }
    }

    @Test func editsOfALocalOnlyConversationQueueNothingButEditsOfASyncedOneDo() async throws {
        try await withClient { client in
            let local = try client.newConversation(participants: [bob], options: ConversationOptions(isDistinct: false))
            try client.addParticipants([carol], to: local.id)
            try client.setMetadata(.string("Trip"), at: try MetadataKeyPath(["title"]), in: local.id)
            #expect(try client.store.outboxEntries().isEmpty)
            #expect(try client.conversation(local.id)?.conversation.participants == [alice, bob, carol])
            #expect(
                try client.conversation(local.id)?.conversation.metadata[try MetadataKeyPath(["title"])]
                    == .string("Trip"))
            // The creation sent with the first message carries the conversation as it is then.
            try client.send(try client.newMessage(parts: [.with(text: "hi")]), in: local.id)
            guard
                case .createConversation(let create) = try OutboxEncoder.frame(for: try client.store.outboxEntries()[0])
            else {
                Issue.record("no creation")
                return
            }
            #expect(create.participants == [bob, carol])
            #expect(create.options.metadata == ["title": .string("Trip")])
            // A conversation from the node: every edit is a command.
            let remote = try conversation([alice, bob, carol], creator: bob, distinct: false)
            try client.store.apply([.conversation(remote)])
            try client.removeParticipants([carol], from: remote.id)
            try client.setMetadata(.dictionary(["a": .string("b")]), at: try MetadataKeyPath(["x"]), in: remote.id)
            try client.deleteMetadata(at: try MetadataKeyPath(["x"]), in: remote.id)
            try client.delete(remote.id, mode: .allParticipants)
            let kinds = try client.store.outboxEntries().map(\.kind).suffix(4)
            #expect(
                Array(kinds) == [
                    "conversation.remove-participants", "conversation.set-metadata", "conversation.delete-metadata",
                    "conversation.delete",
                ])
            #expect(try client.conversation(remote.id) == nil)
        }
    }

    @Test func participantAndMetadataValidationErrors() async throws {
        try await withClient { client in
            let c = try client.newConversation(participants: [bob], options: ConversationOptions(isDistinct: false))
            expectCode(.invalidArgument) { try client.addParticipants([], to: c.id) }
            let many = Set((0..<24).map { try! UserID("user-\($0)") })
            expectCode(.tooManyParticipants) { try client.addParticipants(many, to: c.id) }  // 26 > 25 with receipts
            let tooMany = Set((0..<251).map { try! UserID("user-\($0)") })
            expectCode(.tooManyParticipants) { try client.addParticipants(tooMany, to: c.id) }
            expectCode(.noParticipants) { try client.removeParticipants([alice, bob], from: c.id) }
            expectCode(.notFound) { try client.addParticipants([carol], to: .random()) }
            expectCode(.invalidMetadata) {
                try client.setMetadata(
                    .string(String(repeating: "v", count: 2_049)), at: try MetadataKeyPath(["k"]), in: c.id)
            }
            var big = Metadata()
            for i in 0..<9 {
                big.set(.string(String(repeating: "v", count: 2_000)), at: try MetadataKeyPath(["k\(i)"]))
            }
            expectCode(.invalidMetadata) {
                try client.setMetadata(.dictionary(big.values), at: try MetadataKeyPath(["all"]), in: c.id)
            }  // over 16 KiB
            #expect(try client.conversation(c.id)?.conversation.participants == [alice, bob])  // nothing applied
        }
    }

    @Test func readingQueuesReceiptsOnlyForOthersMessages() async throws {
        try await withClient { client in
            let c = try conversation([alice, bob], creator: bob)
            let m1 = try remoteMessage(in: c.id, from: bob, text: "1", at: 10)
            let m2 = try remoteMessage(in: c.id, from: bob, text: "2", at: 20)
            let m3 = try remoteMessage(in: c.id, from: bob, text: "3", at: 30)
            try client.store.apply([
                .conversation(c), .message(m1, receivedAt: received), .message(m2, receivedAt: received),
                .message(m3, receivedAt: received),
            ])
            #expect(try client.conversation(c.id)?.unreadMessageCount == 3)
            try client.markAsRead(m1.id)
            try client.markAsRead(m1.id)  // already read: nothing queued
            #expect(try client.store.outboxEntries().map(\.kind) == ["message.mark-read"])
            try client.markAllMessagesAsRead(in: c.id)
            let entries = try client.store.outboxEntries()
            #expect(entries.map(\.kind) == ["message.mark-read", "conversation.mark-all-read"])
            guard case .markAllRead(let all) = try OutboxEncoder.frame(for: entries[1]) else {
                Issue.record("no mark-all-read")
                return
            }
            #expect(all.upTo == m3.position)
            #expect(try client.conversation(c.id)?.unreadMessageCount == 0)
            #expect(try client.message(m3.id)?.message.recipientStatus[alice] == .read)
            // Own messages are read already.
            let own = try client.send(try client.newMessage(parts: [.with(text: "mine")]), in: c.id)
            let before = try client.store.outboxEntries().count
            try client.markAsRead(own.id)
            #expect(try client.store.outboxEntries().count == before)
            try client.delete(m2.id, mode: .myDevices)
            #expect(try client.message(m2.id) == nil)
            #expect(try client.store.outboxEntries().last?.kind == "message.delete")
            expectCode(.notFound) { try client.markAsRead(.random()) }
        }
    }

    @Test func typingValidatesTheConversation() async throws {
        try await withClient { client in
            await #expect { try await client.typing(.started, in: .random()) } throws: {
                ($0 as? ClientError)?.code == .notFound
            }
            let c = try client.newConversation(participants: [bob])
            try await client.typing(.started, in: c.id)  // not connected: nothing to send, no error
            try await client.typing(.finished, in: c.id)
        }
    }
}
