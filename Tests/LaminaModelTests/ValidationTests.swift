import Foundation
import Testing

@testable import LaminaModel

@Suite struct IdentifierTests {
    @Test func conversationURLRoundTrips() throws {
        let id = ConversationID.random()
        #expect(id.url.hasPrefix("lamina:///conversations/"))
        #expect(try ConversationID(parsing: id.url) == id)
        #expect(
            try ConversationID(
                parsing: id.url.uppercased().replacingOccurrences(
                    of: "LAMINA:///CONVERSATIONS/", with: "lamina:///conversations/")) == id)
    }

    @Test(arguments: [
        "", "lamina:///conversations/", "lamina:///messages/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7",
        "layer:///messages/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7", "lamina:///conversations/not-a-uuid",
        "lamina:///conversations/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7/", "layer://conversations/2f002ba4",
        "layr:///conversations/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7", "layer:///conversations/",
        "https:///conversations/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7",
    ])
    func badConversationURLsAreRefused(_ text: String) {
        #expect(throws: ModelError.self) { try ConversationID(parsing: text) }
    }

    /// The Platform API's ids (`layer:///…`, from the Server API and webhooks) name the same
    /// objects as Lamina's own, in either case.
    @Test func platformAPIIdentifiersAreAccepted() throws {
        let uuid = "2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7"
        let conversation = try ConversationID(parsing: "layer:///conversations/\(uuid)")
        #expect(conversation == (try ConversationID(parsing: "lamina:///conversations/\(uuid)")))
        #expect(conversation.url == "lamina:///conversations/\(uuid)")
        #expect(try MessageID(parsing: "layer:///messages/\(uuid.uppercased())").uuid == conversation.uuid)
        #expect(try ContentID(parsing: "layer:///content/\(uuid)").uuid == conversation.uuid)
        let part = try MessagePartID(parsing: "layer:///messages/\(uuid)/parts/\(uuid)")
        #expect(part.url == "lamina:///messages/\(uuid)/parts/\(uuid)")
        #expect(throws: ModelError.self) { try MessagePartID(parsing: "layer:///conversations/\(uuid)/parts/\(uuid)") }
    }

    @Test func partIdentifierRoundTrips() throws {
        let message = MessageID.random()
        let part = MessagePartID(message: message, part: UUID())
        #expect(part.url.hasPrefix(message.url + "/parts/"))
        #expect(try MessagePartID(parsing: part.url) == part)
        #expect(throws: ModelError.self) { try MessagePartID(parsing: message.url) }
        #expect(
            try ContentID(parsing: "lamina:///content/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7").url
                == "lamina:///content/2f002ba4-2a08-4019-9fa6-0fe30e2ac3f7")
    }
}

@Suite struct MIMETypeTests {
    @Test(arguments: ["text/plain", "image/png", "application/vnd.lamina+json", "a/b"])
    func valid(_ text: String) throws { #expect(try MIMEType(text).rawValue == text) }

    @Test(arguments: [
        "", "text", "/plain", "text/", "text/plain/x", "text /plain", "text/pla in", "text/plain\n", "a//b",
    ])
    func invalid(_ text: String) {
        #expect(throws: ModelError.self) { try MIMEType(text) }
    }

    @Test func tooLong() {
        let long = "a/" + String(repeating: "b", count: Limits.maxMIMETypeBytes - 1)
        #expect(throws: ModelError.self) { try MIMEType(long) }
    }
}

@Suite struct UserIDTests {
    @Test func limits() throws {
        // Non-literal arguments: `UserID("")` with a literal would be literal coercion (SE-0213).
        let empty = String()
        let withNUL = "a" + "\u{0}" + "b"
        #expect(throws: ModelError.self) { try UserID(empty) }
        #expect(throws: ModelError.self) { try UserID(String(repeating: "x", count: Limits.maxUserIDBytes + 1)) }
        #expect(throws: ModelError.self) { try UserID(withNUL) }
        #expect(
            try UserID(String(repeating: "x", count: Limits.maxUserIDBytes)).rawValue.count == Limits.maxUserIDBytes)
    }

    @Test func systemSendersHaveAReservedFormThatNoParticipantMayHave() throws {
        let admin = try UserID.systemSender(named: "Admin")
        #expect(admin.rawValue == "layer:///system/Admin")
        #expect(admin.isSystemSender)
        #expect(admin.systemSenderName == "Admin")
        #expect(throws: ModelError.self) { try admin.checkIsUser() }
        let alice: UserID = "alice"
        let bare = try UserID(UserID.systemSenderPrefix)
        #expect(!alice.isSystemSender && alice.systemSenderName == nil)
        #expect(!bare.isSystemSender)  // the prefix alone names no sender
        try alice.checkIsUser()
        let longest = String(repeating: "é", count: Limits.maxSystemSenderNameBytes / 2)
        #expect(try UserID.systemSender(named: longest).systemSenderName == longest)
        #expect(throws: ModelError.self) { try UserID.systemSender(named: longest + "x") }
        #expect(throws: ModelError.self) { try UserID.systemSender(named: String()) }
        #expect(throws: ModelError.self) { try UserID.systemSender(named: "a" + "\u{7}") }
        #expect(throws: ModelError.self) {
            try Conversation(
                id: .random(), creator: "alice", participants: [admin], options: .init(), createdAt: .now())
        }
    }
}

@Suite struct MessageValidationTests {
    let conversation = ConversationID.random()

    func message(parts: [MessagePart]) -> Message {
        Message(conversationID: conversation, sender: "alice", parts: parts)
    }

    @Test func partCountLimits() throws {
        let part = try MessagePart(text: "hi")
        #expect(throws: ModelError(.noParts, "a message needs at least one part")) { try message(parts: []).validate() }
        let many = try (0...Limits.maxPartsPerMessage).map { _ in try MessagePart(text: "x") }
        #expect(
            performing: { try message(parts: many).validate() }, throws: { ($0 as? ModelError)?.code == .tooManyParts })
        try message(parts: Array(many.prefix(Limits.maxPartsPerMessage))).validate()
        try message(parts: [part]).validate()
    }

    @Test func inlineLimit() throws {
        _ = try MessagePart(
            mimeType: "application/octet-stream", bytes: [UInt8](repeating: 1, count: Limits.maxInlinePartBytes))
        #expect(
            performing: {
                try MessagePart(
                    mimeType: "application/octet-stream",
                    bytes: [UInt8](repeating: 1, count: Limits.maxInlinePartBytes + 1))
            }, throws: { ($0 as? ModelError)?.code == .inlineTooLarge })
        #expect(MessagePart.needsRichContent(size: 2_049))
        #expect(!MessagePart.needsRichContent(size: 2_048))
    }

    @Test func externalLimit() throws {
        let ok = MessagePart(
            mimeType: "video/mp4",
            content: .external(
                ContentReference(id: .random(), size: Limits.maxPartBytes, sha256: Array(repeating: 0, count: 32))))
        try ok.validate()
        let tooBig = MessagePart(
            mimeType: "video/mp4",
            content: .external(
                ContentReference(id: .random(), size: Limits.maxPartBytes + 1, sha256: Array(repeating: 0, count: 32))))
        #expect(performing: { try tooBig.validate() }, throws: { ($0 as? ModelError)?.code == .partTooLarge })
        let badHash = MessagePart(
            mimeType: "video/mp4", content: .external(ContentReference(id: .random(), size: 10_000, sha256: [1, 2])))
        #expect(
            performing: { try badHash.validate() }, throws: { ($0 as? ModelError)?.code == .invalidContentReference })
    }

    @Test func duplicatePartIDs() throws {
        let part = try MessagePart(text: "x")
        #expect(
            performing: { try message(parts: [part, part]).validate() },
            throws: { ($0 as? ModelError)?.code == .duplicatePart })
    }

    @Test func pushLimits() throws {
        var m = message(parts: [try MessagePart(text: "x")])
        m.push = PushConfiguration(alert: String(repeating: "a", count: Limits.maxPushStringBytes + 1))
        #expect(performing: { try m.validate() }, throws: { ($0 as? ModelError)?.code == .invalidPushConfiguration })
        m.push = PushConfiguration(
            alert: "New message", sound: "chime.aiff", title: "Alice", category: "chat", data: ["k": "v"])
        try m.validate()
    }
}

@Suite struct ConversationTests {
    @Test func creatorIsImplicitParticipant() throws {
        let c = try Conversation(creator: "alice", participants: ["bob"])
        #expect(c.participants == ["alice", "bob"])
        #expect(c.isDistinct)
        #expect(c.deliveryReceiptsEnabled)
    }

    @Test func participantLimitsDependOnReceipts() throws {
        let users = try (1..<Limits.maxParticipantsWithReceipts).map { try UserID("u\($0)") }
        _ = try Conversation(creator: "alice", participants: Set(users))
        let more = Set(users + ["extra"])
        #expect(
            performing: { try Conversation(creator: "alice", participants: more) },
            throws: { ($0 as? ModelError)?.code == .tooManyParticipants })
        // Layer: the larger limit only with read receipts off, whatever the delivery switch.
        #expect(
            performing: {
                try Conversation(
                    creator: "alice", participants: more, options: ConversationOptions(deliveryReceiptsEnabled: false))
            }, throws: { ($0 as? ModelError)?.code == .tooManyParticipants })
        _ = try Conversation(
            creator: "alice", participants: more, options: ConversationOptions(readReceiptsEnabled: false))
        _ = try Conversation(
            creator: "alice", participants: more,
            options: ConversationOptions(deliveryReceiptsEnabled: false, readReceiptsEnabled: false))
    }
}

@Suite struct MetadataTests {
    @Test func setGetRemoveByKeyPath() throws {
        var m = Metadata()
        let path = try MetadataKeyPath(parsing: "style.colors.background")
        m.set(.string("#fff"), at: path)
        m.set(.string("Lunch"), at: try MetadataKeyPath(parsing: "title"))
        #expect(m[path] == .string("#fff"))
        #expect(m.leaves.map(\.0.description) == ["style.colors.background", "title"])
        m.remove(at: path)
        #expect(m[path] == nil)
        #expect(m[try MetadataKeyPath(parsing: "style.colors")] == .dictionary([:]))
    }

    @Test func limits() throws {
        #expect(throws: ModelError.self) { try MetadataKeyPath(parsing: "a..b") }
        #expect(throws: ModelError.self) { try MetadataKeyPath(parsing: "a.b.c.d.e.f.g.h.i") }
        var m = Metadata()
        for i in 0..<20 { m.set(.string(String(repeating: "v", count: 1_000)), at: try MetadataKeyPath(["k\(i)"])) }
        #expect(performing: { try m.validate() }, throws: { ($0 as? ModelError)?.code == .invalidMetadata })
        let deep: MetadataValue = (0..<Limits.maxMetadataDepth).reduce(.string("x")) { inner, _ in
            .dictionary(["k": inner])
        }
        #expect(throws: ModelError.self) { try Metadata(["k": deep]).validate() }
    }
}

@Suite struct OrderingTests {
    @Test func recipientStatusOrder() {
        #expect(RecipientStatus.allCases.sorted() == [.invalid, .pending, .sent, .delivered, .read])
        #expect(RecipientStatus.invalid.rawValue == -1 && RecipientStatus.read.rawValue == 3)
    }

    @Test func hlcOrderBreaksTiesByNode() {
        let a = HLCTimestamp(physical: 10, logical: 1, node: NodeID(1))
        let b = HLCTimestamp(physical: 10, logical: 1, node: NodeID(2))
        let c = HLCTimestamp(physical: 10, logical: 2, node: NodeID(0))
        let d = HLCTimestamp(physical: 11, logical: 0, node: NodeID(0))
        #expect([d, c, b, a].sorted() == [a, b, c, d])
    }

    /// User ids order by their UTF-8 bytes: a prefix first, bytes unsigned (so non-ASCII after
    /// ASCII), short (inline) and long (heap) strings alike; checked against the byte
    /// sequences' own lexicographic order over random ids.
    @Test func userIDsOrderByUTF8Bytes() throws {
        let fixed: [UserID] = ["", "a", "ab", "b", "Z", "é", "ée", "😀", String(repeating: "x", count: 40)].compactMap {
            try? UserID($0)
        }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aAz09_-éü😀")
        let random = try (0..<300).map { _ in
            try UserID(String((0..<Int.random(in: 1...24, using: &generator)).map { _ in alphabet.randomElement()! }))
        }
        let all = fixed + random
        for a in all {
            for b in all.prefix(60) {
                #expect((a < b) == a.rawValue.utf8.lexicographicallyPrecedes(b.rawValue.utf8), "\(a) < \(b)")
            }
        }
        #expect(try UserID("a") < UserID("ab") && !(try UserID("ab") < UserID("a")))
        #expect(try UserID("z") < UserID("é"))
    }
}
