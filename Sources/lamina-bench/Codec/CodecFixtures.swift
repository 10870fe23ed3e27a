import Foundation
import LaminaModel
import LaminaWire

/// Deterministic content for the cases: fixed UUIDs and bytes, no randomness.
enum CodecFixtures {
    static func uuid(_ n: Int) -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(8..<16, with: $0) }
        bytes[0] = 0x4C  // 'L'
        bytes[6] = 0x40 | (bytes[6] & 0x0F)  // version 4
        bytes[8] = 0x80 | (bytes[8] & 0x3F)  // RFC 4122 variant
        return bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }

    static func text(_ count: Int, seed: Int) -> [UInt8] {
        let alphabet = Array("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".utf8)
        return (0..<count).map { alphabet[($0 + seed) % alphabet.count] }
    }

    static let conversation = ConversationID(uuid: uuid(1))
    static let push = PushConfiguration(alert: "Alice: Lorem ipsum dolor sit amet", sound: "chime.aiff")
    static let users: [UserID] = ["alice@example.com", "bob@example.com", "carol@example.com"]

    /// (a) SEND_MESSAGE with one 100-byte text/plain part and a push configuration.
    static func onePartMessage() -> SendMessage {
        SendMessage(
            messageID: MessageID(uuid: uuid(2)),
            conversationID: conversation,
            parts: [MessagePart(id: uuid(3), mimeType: .textPlain, content: .inline(text(100, seed: 0)))],
            push: push
        )
    }

    /// (b) SEND_MESSAGE with ten parts: a 100-byte text, seven 200-byte JSON parts and
    /// two JPEG images as content references.
    static func tenPartMessage() -> SendMessage {
        var parts = [MessagePart(id: uuid(10), mimeType: .textPlain, content: .inline(text(100, seed: 1)))]
        for i in 1...7 {
            parts.append(
                MessagePart(id: uuid(10 + i), mimeType: "application/json", content: .inline(text(200, seed: i))))
        }
        for i in 8...9 {
            let ref = ContentReference(
                id: ContentID(uuid: uuid(100 + i)), size: 1_500_000 + UInt64(i),
                sha256: (0..<32).map { UInt8(($0 * 7 + i) & 0xFF) })
            parts.append(MessagePart(id: uuid(10 + i), mimeType: "image/jpeg", content: .external(ref)))
        }
        return SendMessage(messageID: MessageID(uuid: uuid(4)), conversationID: conversation, parts: parts, push: push)
    }

    /// (c) CHANGE_BATCH of 100 changes, as a device catching up: 50 message-created changes
    /// (a 100-byte text message with sender, time, position and three recipient statuses)
    /// interleaved with 50 recipient-status changes.
    static func changeBatch() -> ChangeBatch {
        var changes: [Change] = []
        for i in 0..<100 {
            let seq = UInt64(1_000 + i)
            let messageID = MessageID(uuid: uuid(1_000 + i / 2))
            if i % 2 == 0 {
                let message = Message(
                    id: messageID,
                    conversationID: conversation,
                    sender: users[i % 3],
                    parts: [
                        MessagePart(id: uuid(5_000 + i), mimeType: .textPlain, content: .inline(text(100, seed: i)))
                    ],
                    sentAt: Timestamp(millisecondsSince1970: 1_763_700_000_000 + Int64(i)),
                    position: HLCTimestamp(
                        physical: 1_763_700_000_000 + UInt64(i), logical: UInt32(i % 4), node: NodeID(0x1A2B)),
                    push: nil,
                    recipientStatus: [users[0]: .read, users[1]: .delivered, users[2]: .sent]
                )
                changes.append(Change(seq: seq, event: .messageCreated(message)))
            } else {
                let status = MessageStatusChanged(
                    conversationID: conversation, messageID: messageID, user: users[(i + 1) % 3], status: .read)
                changes.append(Change(seq: seq, event: .messageStatusChanged(status)))
            }
        }
        return ChangeBatch(changes: changes)
    }

    // MARK: The protobuf equivalents

    static func bytes(_ uuid: UUID) -> Data { withUnsafeBytes(of: uuid.uuid) { Data($0) } }

    static func protobuf(_ push: PushConfiguration) -> Lamina_Bench_PushConfiguration {
        var p = Lamina_Bench_PushConfiguration()
        if let alert = push.alert { p.alert = alert }
        if let sound = push.sound { p.sound = sound }
        if let title = push.title { p.title = title }
        if let category = push.category { p.category = category }
        p.data = push.data
        return p
    }

    static func protobuf(_ part: MessagePart) -> Lamina_Bench_MessagePart {
        var p = Lamina_Bench_MessagePart()
        p.id = bytes(part.id)
        p.mimeType = part.mimeType.rawValue
        switch part.content {
        case .inline(let content):
            p.inline = Data(content)
        case .external(let ref):
            var r = Lamina_Bench_ContentReference()
            r.id = bytes(ref.id.uuid)
            r.size = ref.size
            r.sha256 = Data(ref.sha256)
            p.external = r
        }
        return p
    }

    static func protobuf(_ send: SendMessage) -> Lamina_Bench_SendMessage {
        var m = Lamina_Bench_SendMessage()
        m.messageID = bytes(send.messageID.uuid)
        m.conversationID = bytes(send.conversationID.uuid)
        m.parts = send.parts.map(protobuf)
        if let push = send.push { m.push = protobuf(push) }
        return m
    }

    static func protobuf(_ message: Message) -> Lamina_Bench_Message {
        var m = Lamina_Bench_Message()
        m.id = bytes(message.id.uuid)
        m.conversationID = bytes(message.conversationID.uuid)
        m.sender = message.sender.rawValue
        if let sentAt = message.sentAt { m.sentAt = sentAt.millisecondsSince1970 }
        if let position = message.position {
            var h = Lamina_Bench_HLCTimestamp()
            h.physical = position.physical
            h.logical = position.logical
            h.node = position.node.rawValue
            m.position = h
        }
        m.parts = message.parts.map(protobuf)
        if let push = message.push { m.push = protobuf(push) }
        m.recipientStatus = Dictionary(
            uniqueKeysWithValues: message.recipientStatus.map { ($0.key.rawValue, Int32($0.value.rawValue)) })
        return m
    }

    static func protobuf(_ batch: ChangeBatch) -> Lamina_Bench_ChangeBatch {
        var b = Lamina_Bench_ChangeBatch()
        b.changes = batch.changes.map { change in
            var c = Lamina_Bench_Change()
            c.seq = change.seq
            switch change.event {
            case .messageCreated(let message):
                c.messageCreated = protobuf(message)
            case .messageStatusChanged(let s):
                var p = Lamina_Bench_MessageStatusChanged()
                p.conversationID = bytes(s.conversationID.uuid)
                p.messageID = bytes(s.messageID.uuid)
                p.user = s.user.rawValue
                p.status = Int32(s.status.rawValue)
                c.messageStatusChanged = p
            default:
                preconditionFailure("the benchmark batch holds only message-created and status changes")
            }
            return c
        }
        return b
    }
}
