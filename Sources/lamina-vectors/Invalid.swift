import Foundation
import LaminaModel
import LaminaWire
import NIOCore

// The inputs behind Protocol/vectors/invalid: each must fail with the named error code.

struct InvalidVector {
    var name: String
    var description: String
    var bytes: [UInt8]
    var error: WireError.Code
}

/// Byte-building helpers, independent of the codec under test.
enum B {
    static func varint(_ v: UInt64) -> [UInt8] {
        var v = v
        var out = [UInt8]()
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
        return out
    }
    static func u16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func u32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
    }
    static func u64(_ v: UInt64) -> [UInt8] { (0..<8).reversed().map { UInt8((v >> (UInt64($0) * 8)) & 0xFF) } }
    static func uuid(_ u: UUID) -> [UInt8] { withUnsafeBytes(of: u.uuid) { Array($0) } }
    static func str(_ s: String) -> [UInt8] { varint(UInt64(s.utf8.count)) + Array(s.utf8) }
    static func raw(_ bytes: [UInt8]) -> [UInt8] { varint(UInt64(bytes.count)) + bytes }
    static func hlc(_ p: UInt64, _ l: UInt64, _ n: UInt64) -> [UInt8] { varint(p) + varint(l) + u64(n) }
    /// A whole frame: header (length defaults to the payload's) and payload.
    static func frame(_ type: FrameType, flags: UInt16 = 0, length: UInt32? = nil, _ payload: [UInt8]) -> [UInt8] {
        frame(type.rawValue, flags: flags, length: length, payload)
    }
    static func frame(_ type: UInt16, flags: UInt16 = 0, length: UInt32? = nil, _ payload: [UInt8]) -> [UInt8] {
        u32(length ?? UInt32(payload.count)) + u16(type) + u16(flags) + payload
    }
    static func encoded(_ frame: Frame) -> [UInt8] {
        let buffer = try! frame.encoded()
        return buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes)!
    }
    /// An inline text/plain part.
    static func textPart(_ id: Int, _ bytes: [UInt8], mime: String = "text/plain") -> [UInt8] {
        uuid(u(id)) + str(mime) + [0] + raw(bytes)
    }
    /// A SEND_MESSAGE payload with these encoded parts (count given separately) and no push.
    static func sendMessage(count: UInt64, _ parts: [UInt8]) -> [UInt8] {
        uuid(u(0xA1)) + uuid(u(0xC1)) + varint(count) + parts + [0]
    }
    /// A CREATE_CONVERSATION payload with this encoded participant set and metadata map.
    static func createConversation(
        distinct: UInt8 = 1, receipts: UInt8 = 1, participants: [UInt8] = varint(1) + str("bob"),
        metadata: [UInt8] = [0]
    ) -> [UInt8] {
        uuid(u(0xC1)) + [distinct, receipts] + participants + metadata
    }
    /// A metadata map nested `levels` deep: {"k": {"k": ... {"k": "v"}}}.
    static func nested(_ levels: Int) -> [UInt8] {
        levels == 1 ? varint(1) + str("k") + [0] + str("v") : varint(1) + str("k") + [1] + nested(levels - 1)
    }
}

extension B {
    /// A REPLICATE frame of one operation (origin 3, counter 1) whose event is `event` (kind byte included).
    static func replicate(_ event: [UInt8]) -> [UInt8] {
        frame(.replicate, varint(1) + u64(3) + varint(1) + hlc(1_767_225_600_000, 0, 3) + event)
    }
    /// A kind 64 identity event for bob, present, with these encoded values and metadata string maps.
    static func identity(values: [UInt8], metadata: [UInt8] = [0]) -> [UInt8] {
        [64] + str("bob") + [1] + values + metadata
    }
}

let reqID = B.uuid(u(1))
let conv = B.uuid(u(0xC1))
let msg = B.uuid(u(0xA1))

let invalidVectors: [InvalidVector] = [
    // SPEC §3.3 varints
    .init(
        name: "varint-non-minimal", description: "SYNC whose cursor 0 is encoded in two bytes (80 00).",
        bytes: B.frame(.sync, reqID + [0x80, 0x00]), error: .nonCanonical),
    .init(
        name: "varint-non-minimal-three-bytes",
        description: "SYNC whose cursor 1 is encoded in three bytes (81 80 00).",
        bytes: B.frame(.sync, reqID + [0x81, 0x80, 0x00]), error: .nonCanonical),
    .init(
        name: "varint-over-64-bits",
        description: "SYNC whose cursor is a ten-byte varint with a tenth byte of 02 (65 bits).",
        bytes: B.frame(.sync, reqID + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]), error: .malformed),
    .init(
        name: "varint-eleven-bytes", description: "SYNC whose cursor varint runs on past ten bytes.",
        bytes: B.frame(.sync, reqID + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
        error: .malformed),
    .init(
        name: "varint-tenth-byte-zero",
        description:
            "SYNC whose cursor is ten bytes with a tenth byte of 00: malformed (the tenth-byte rule), not non-canonical.",
        bytes: B.frame(.sync, reqID + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00]), error: .malformed),
    .init(
        name: "varint-tenth-byte-two",
        description: "SYNC whose cursor is ten bytes with a tenth byte of 02 over a zero ninth group.",
        bytes: B.frame(.sync, reqID + [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02]), error: .malformed),
    .init(
        name: "varint-ends-in-payload",
        description: "SYNC whose cursor varint has its continuation bit set on the payload's last byte.",
        bytes: B.frame(.sync, reqID + [0x80]), error: .truncated),
    .init(
        name: "varint-non-minimal-length", description: "HELLO whose agent length 0 is encoded as 80 00.",
        bytes: B.frame(.hello, B.u16(1) + B.u16(1) + B.u64(0) + [0x80, 0x00]), error: .nonCanonical),
    .init(
        name: "hlc-logical-over-32-bits", description: "MARK_ALL_READ whose position's logical counter is 2^32.",
        bytes: B.frame(.markAllRead, reqID + conv + B.varint(1) + B.varint(1 << 32) + B.u64(1)), error: .malformed),
    // SPEC §2 framing
    .init(
        name: "frame-too-large",
        description:
            "A header declaring a SEND_MESSAGE payload of 4 MiB + 1; no payload follows (refused on the header).",
        bytes: B.frame(.sendMessage, length: 4_194_305, []), error: .frameTooLarge),
    .init(
        name: "frame-too-large-max-length", description: "A header declaring a payload of 2^32 - 1 bytes.",
        bytes: B.frame(.change, length: UInt32.max, []), error: .frameTooLarge),
    .init(
        name: "frame-too-large-for-type",
        description: "A PING declaring 9 payload bytes (a PING payload is at most 8).",
        bytes: B.frame(.ping, B.u64(1) + [0]), error: .frameTooLarge),
    .init(
        name: "truncated-header", description: "Five bytes: less than a header.",
        bytes: [0, 0, 0, 8, 0], error: .truncated),
    .init(
        name: "truncated-payload", description: "A SEND_MESSAGE whose last payload byte is missing.",
        bytes: Array(B.encoded(validVectors.first { $0.name == "send-message-text" }!.frame).dropLast()),
        error: .truncated),
    .init(
        name: "truncated-field", description: "A SYNC payload that ends inside the cursor varint (payload length 17).",
        bytes: B.frame(.sync, reqID + [0x80]), error: .truncated),
    .init(
        name: "truncated-string", description: "A HELLO whose agent declares 10 bytes but 3 remain in the payload.",
        bytes: B.frame(.hello, B.u16(1) + B.u16(1) + B.u64(0) + [10] + Array("abc".utf8)), error: .truncated),
    .init(
        name: "trailing-bytes-in-payload", description: "A MARK_READ payload with one byte after its fields.",
        bytes: B.frame(.markRead, reqID + conv + msg + [0]), error: .trailingBytes),
    .init(
        name: "trailing-bytes-after-cursor", description: "A SYNC with one byte after its cursor.",
        bytes: B.frame(.sync, reqID + [0x05, 0x00]), error: .trailingBytes),
    .init(
        name: "unknown-type", description: "Frame type 0x7777, not marked skippable.",
        bytes: B.frame(0x7777, []), error: .unknownFrameType),
    .init(
        name: "unknown-type-with-payload", description: "Frame type 0x0100 (unassigned) with a 3-byte payload.",
        bytes: B.frame(0x0100, [1, 2, 3]), error: .unknownFrameType),
    .init(
        name: "bad-flags-reserved", description: "A PING with reserved flag bit 1 set.",
        bytes: B.frame(.ping, flags: 0x0002, B.u64(1)), error: .badFlags),
    .init(
        name: "bad-flags-skippable-known-type",
        description: "A PING marked SKIPPABLE: not allowed on a type version 1 defines.",
        bytes: B.frame(.ping, flags: 0x0001, B.u64(1)), error: .badFlags),
    .init(
        name: "bad-flags-unknown-type", description: "An unknown type with SKIPPABLE and a reserved bit set.",
        bytes: B.frame(0x7777, flags: 0x8001, []), error: .badFlags),
    // SPEC §3.2, §3.8 bools and presence
    .init(
        name: "bad-bool", description: "CREATE_CONVERSATION whose distinct flag is 02.",
        bytes: B.frame(.createConversation, B.createConversation(distinct: 2)), error: .malformed),
    .init(
        name: "bad-receipts-byte", description: "CREATE_CONVERSATION whose receipts byte is 04 (0 to 3 are defined).",
        bytes: B.frame(.createConversation, B.createConversation(receipts: 4)), error: .malformed),
    .init(
        name: "message-trailer-bad-flags",
        description: "SEND_MESSAGE whose trailer byte is 04 (bit 0 push, bit 1 mentions; SPEC §3.17).",
        bytes: B.frame(.sendMessage, B.uuid(u(0xA1)) + B.uuid(u(0xC1)) + B.varint(1) + B.textPart(0xB1, [0x61]) + [4]),
        error: .malformed),
    .init(
        name: "message-mentions-empty",
        description: "SEND_MESSAGE whose trailer says mentions (02) followed by an empty user set.",
        bytes: B.frame(
            .sendMessage, B.uuid(u(0xA1)) + B.uuid(u(0xC1)) + B.varint(1) + B.textPart(0xB1, [0x61]) + [2] + B.varint(0)
        ),
        error: .nonCanonical),
    .init(
        name: "set-notification-level-bad-level",
        description: "SET_NOTIFICATION_LEVEL whose level is 03 (0 all, 1 mentions, 2 none; SPEC §6.10).",
        bytes: B.frame(.setNotificationLevel, reqID + conv + [3, 0]), error: .malformed),
    .init(
        name: "bad-presence-byte", description: "ACK whose conversation presence byte is 02.",
        bytes: B.frame(.ack, reqID + [2, 0, 0, 0]), error: .malformed),
    // SPEC §3.5 strings
    .init(
        name: "bad-utf8", description: "HELLO whose agent is C3 28 (invalid UTF-8).",
        bytes: B.frame(.hello, B.u16(1) + B.u16(1) + B.u64(0) + B.raw([0xC3, 0x28])), error: .invalidUTF8),
    .init(
        name: "bad-utf8-overlong", description: "HELLO whose agent is C0 AF (an overlong encoding of '/').",
        bytes: B.frame(.hello, B.u16(1) + B.u16(1) + B.u64(0) + B.raw([0xC0, 0xAF])), error: .invalidUTF8),
    .init(
        name: "bad-utf8-surrogate", description: "HELLO whose agent is ED A0 80 (a UTF-16 surrogate).",
        bytes: B.frame(.hello, B.u16(1) + B.u16(1) + B.u64(0) + B.raw([0xED, 0xA0, 0x80])), error: .invalidUTF8),
    .init(
        name: "string-over-limit", description: "ERROR whose reason is 1,025 bytes (the limit is 1,024).",
        bytes: B.frame(.error, [0] + B.u16(900) + B.str(String(repeating: "x", count: 1_025)) + [0, 0, 0]),
        error: .limitExceeded),
    .init(
        name: "user-id-over-limit", description: "ADD_PARTICIPANTS with a 257-byte user id.",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(1) + B.str(String(repeating: "u", count: 257))),
        error: .invalidUserID),
    .init(
        name: "user-id-empty", description: "ADD_PARTICIPANTS with an empty user id.",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(1) + B.str("")), error: .invalidUserID),
    .init(
        name: "user-id-control-character", description: "ADD_PARTICIPANTS with a user id containing U+0007.",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(1) + B.str("a\u{7}b")), error: .invalidUserID),
    // SPEC §3.9 sets
    .init(
        name: "participants-unsorted", description: "ADD_PARTICIPANTS with users bob, alice (not in byte order).",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(2) + B.str("bob") + B.str("alice")),
        error: .nonCanonical),
    .init(
        name: "participants-duplicate", description: "ADD_PARTICIPANTS with bob twice.",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(2) + B.str("bob") + B.str("bob")), error: .nonCanonical
    ),
    .init(
        name: "participants-count-past-payload",
        description:
            "ADD_PARTICIPANTS declaring 200 users (within the limit) with 4 payload bytes left: truncated, before any element is read.",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(200) + B.str("bob")), error: .truncated),
    .init(
        name: "parts-count-past-payload",
        description: "SEND_MESSAGE declaring 500 parts with one part and a push byte left.",
        bytes: B.frame(.sendMessage, B.sendMessage(count: 500, B.textPart(0xB1, Array("hi".utf8)))), error: .truncated),
    .init(
        name: "participants-canonically-equivalent",
        description:
            "ADD_PARTICIPANTS with \"e\" + U+0301 and \"\u{e9}\" (65 cc 81 < c3 a9 in byte order, canonically equivalent).",
        bytes: B.frame(
            .addParticipants, reqID + conv + B.varint(2) + B.raw([0x65, 0xCC, 0x81]) + B.raw([0xC3, 0xA9])),
        error: .nonCanonical),
    .init(
        name: "metadata-canonically-equivalent-keys",
        description:
            "SET_METADATA of a map whose keys are \"e\" + U+0301 and \"\u{e9}\": canonically equivalent, so non-canonical.",
        bytes: B.frame(
            .setMetadata,
            reqID + conv + B.varint(1) + B.str("m") + [1] + B.varint(2) + B.raw([0x65, 0xCC, 0x81]) + [0] + B.str("1")
                + B.raw([0xC3, 0xA9]) + [0] + B.str("2")), error: .nonCanonical),
    .init(
        name: "participants-too-many", description: "ADD_PARTICIPANTS declaring 251 users (the limit is 250).",
        bytes: B.frame(.addParticipants, reqID + conv + B.varint(251)), error: .tooManyParticipants),
    // SPEC §3.12 parts
    .init(
        name: "too-many-parts", description: "SEND_MESSAGE declaring 1,001 parts (refused on the count).",
        bytes: B.frame(.sendMessage, B.uuid(u(0xA1)) + conv + B.varint(1_001)), error: .tooManyParts),
    .init(
        name: "no-parts", description: "SEND_MESSAGE with 0 parts.",
        bytes: B.frame(.sendMessage, B.sendMessage(count: 0, [])), error: .noParts),
    .init(
        name: "inline-part-over-2kb", description: "SEND_MESSAGE with a 2,049-byte inline part.",
        bytes: B.frame(.sendMessage, B.sendMessage(count: 1, B.textPart(0xB1, [UInt8](repeating: 0x61, count: 2_049)))),
        error: .inlineTooLarge),
    .init(
        name: "part-too-large", description: "SEND_MESSAGE with a content reference of 2 GiB + 1 bytes.",
        bytes: B.frame(
            .sendMessage,
            B.sendMessage(
                count: 1,
                B.uuid(u(0xB1)) + B.str("image/png") + [1] + B.uuid(u(0xE1)) + B.varint(2_147_483_649)
                    + [UInt8](repeating: 0, count: 32))), error: .partTooLarge),
    .init(
        name: "bad-part-kind", description: "SEND_MESSAGE with part kind 2.",
        bytes: B.frame(
            .sendMessage, B.sendMessage(count: 1, B.uuid(u(0xB1)) + B.str("text/plain") + [2] + B.raw([0x61]))),
        error: .malformed),
    .init(
        name: "bad-mime-type-no-slash", description: "SEND_MESSAGE with MIME type 'textplain'.",
        bytes: B.frame(.sendMessage, B.sendMessage(count: 1, B.textPart(0xB1, [0x61], mime: "textplain"))),
        error: .invalidMIMEType),
    .init(
        name: "bad-mime-type-space", description: "SEND_MESSAGE with MIME type 'text/ plain'.",
        bytes: B.frame(.sendMessage, B.sendMessage(count: 1, B.textPart(0xB1, [0x61], mime: "text/ plain"))),
        error: .invalidMIMEType),
    .init(
        name: "bad-mime-type-two-slashes", description: "SEND_MESSAGE with MIME type 'a/b/c'.",
        bytes: B.frame(.sendMessage, B.sendMessage(count: 1, B.textPart(0xB1, [0x61], mime: "a/b/c"))),
        error: .invalidMIMEType),
    .init(
        name: "push-token-unknown-kind", description: "REGISTER_PUSH_TOKEN with token kind 4 (0 to 3 are defined).",
        bytes: B.frame(.registerPushToken, B.uuid(u(0x0F)) + [4] + B.str("abc")), error: .malformed),
    .init(
        name: "push-token-too-long",
        description: "REGISTER_PUSH_TOKEN whose FCM token declares 1,025 bytes (the limit is 1,024).",
        bytes: B.frame(
            .registerPushToken, B.uuid(u(0x0F)) + [2] + B.varint(1_025) + [UInt8](repeating: 0x61, count: 1_025)),
        error: .invalidPushToken),
    .init(
        name: "push-token-bad-environment",
        description: "REGISTER_PUSH_TOKEN for APNs with environment 2 (0 production, 1 sandbox).",
        bytes: B.frame(
            .registerPushToken,
            B.uuid(u(0x0F)) + [1] + B.raw([UInt8](repeating: 0xAB, count: 32)) + B.str("com.example.chat") + [2]),
        error: .malformed),
    .init(
        name: "push-too-many-data-entries",
        description: "SEND_MESSAGE whose push data declares 33 entries (the limit is 32).",
        bytes: B.frame(
            .sendMessage,
            B.uuid(u(0xA1)) + conv + B.varint(1) + B.textPart(0xB1, [0x61]) + [1, 0, 0, 0, 0] + B.varint(33)),
        error: .invalidPushConfiguration),
    // SPEC §3.14 metadata
    .init(
        name: "metadata-nesting-too-deep",
        description: "CREATE_CONVERSATION whose metadata nests 9 levels (the limit is 8).",
        bytes: B.frame(.createConversation, B.createConversation(metadata: B.nested(9))), error: .invalidMetadata),
    .init(
        name: "metadata-key-with-dot", description: "CREATE_CONVERSATION with metadata key 'a.b'.",
        bytes: B.frame(
            .createConversation, B.createConversation(metadata: B.varint(1) + B.str("a.b") + [0] + B.str("v"))),
        error: .invalidMetadata),
    .init(
        name: "metadata-key-empty", description: "CREATE_CONVERSATION with an empty metadata key.",
        bytes: B.frame(.createConversation, B.createConversation(metadata: B.varint(1) + B.str("") + [0] + B.str("v"))),
        error: .invalidMetadata),
    .init(
        name: "metadata-keys-unsorted", description: "CREATE_CONVERSATION with metadata keys b, a.",
        bytes: B.frame(
            .createConversation,
            B.createConversation(metadata: B.varint(2) + B.str("b") + [0] + B.str("1") + B.str("a") + [0] + B.str("2"))),
        error: .nonCanonical),
    .init(
        name: "metadata-bad-kind", description: "CREATE_CONVERSATION with metadata value kind 2.",
        bytes: B.frame(
            .createConversation, B.createConversation(metadata: B.varint(1) + B.str("a") + [2] + B.str("1"))),
        error: .malformed),
    .init(
        name: "key-path-empty", description: "DELETE_METADATA with a key path of 0 components.",
        bytes: B.frame(.deleteMetadata, reqID + conv + B.varint(0)), error: .invalidMetadata),
    .init(
        name: "key-path-too-deep-value", description: "SET_METADATA at an 8-component path with a map value (level 9).",
        bytes: B.frame(
            .setMetadata, reqID + conv + B.varint(8) + (0..<8).flatMap { _ in B.str("k") } + [1] + B.varint(0)),
        error: .invalidMetadata),
    // SPEC §3.11 enumerations
    .init(
        name: "bad-deletion-mode", description: "DELETE_MESSAGE with mode 0.",
        bytes: B.frame(.deleteMessage, reqID + conv + msg + [0]), error: .malformed),
    .init(
        name: "bad-typing-state", description: "TYPING with state 3.",
        bytes: B.frame(.typing, conv + [3]), error: .malformed),
    .init(
        name: "bad-recipient-status", description: "CHANGE message-status-changed with status 4.",
        bytes: B.frame(.change, B.varint(1) + [7] + conv + msg + B.str("bob") + [4]), error: .malformed),
    .init(
        name: "bad-change-kind", description: "CHANGE with event kind 63 (no kind between the last one and 64).",
        bytes: B.frame(.change, B.varint(1) + [63]), error: .malformed),
    .init(
        name: "create-channel-empty-name", description: "CREATE_CHANNEL whose name is empty.",
        bytes: B.frame(.createChannel, B.uuid(u(0xD1)) + B.str("")), error: .malformed),
    .init(
        name: "create-channel-name-over-limit", description: "CREATE_CHANNEL whose name is 129 bytes (at most 128).",
        bytes: B.frame(.createChannel, B.uuid(u(0xD1)) + B.str(String(repeating: "n", count: 129))),
        error: .limitExceeded),
    .init(
        name: "create-channel-name-control", description: "CREATE_CHANNEL whose name holds a line feed.",
        bytes: B.frame(.createChannel, B.uuid(u(0xD1)) + B.str("gen\neral")), error: .malformed),
    .init(
        name: "send-channel-message-no-parts", description: "SEND_CHANNEL_MESSAGE with no part.",
        bytes: B.frame(.sendChannelMessage, msg + B.uuid(u(0xD1)) + B.varint(0)), error: .noParts),
    .init(
        name: "fetch-channel-count-over-32-bits",
        description: "FETCH_CHANNEL whose count does not fit in 32 bits (a varint32).",
        bytes: B.frame(.fetchChannel, reqID + B.uuid(u(0xD1)) + B.varint(0) + B.varint(1 << 32)),
        error: .malformed),
    .init(
        name: "change-channel-membership-bad-flag",
        description: "CHANGE channel-membership-changed (kind 17) whose joined flag is 2.",
        bytes: B.frame(.change, B.varint(1) + [17] + B.uuid(u(0xD1)) + B.str("bob") + [2]), error: .malformed),
    .init(
        name: "peer-presence-empty", description: "PEER_PRESENCE with no report.",
        bytes: B.frame(.peerPresence, B.varint(0)), error: .malformed),
    .init(
        name: "peer-presence-withdrawn-unsorted",
        description: "PEER_PRESENCE_WITHDRAWN naming node 4 before node 3 (strictly ascending is the one encoding).",
        bytes: B.frame(.peerPresenceWithdrawn, B.varint(2) + B.u64(4) + B.u64(3)), error: .nonCanonical),
    .init(
        name: "peer-presence-withdrawn-empty", description: "PEER_PRESENCE_WITHDRAWN naming no node.",
        bytes: B.frame(.peerPresenceWithdrawn, B.varint(0)), error: .malformed),
    .init(
        name: "peer-presence-offline-choice",
        description: "PEER_PRESENCE whose report carries a choice of offline (0), which is not a choice.",
        bytes: B.frame(
            .peerPresence,
            B.varint(1) + B.str("bob") + B.varint(1) + [1, 0] + B.varint(5) + B.varint(0) + B.u64(1) + B.varint(6)
                + B.varint(0) + B.u64(1)), error: .malformed),
    .init(
        name: "set-presence-bad-status", description: "SET_PRESENCE with status 5 (0 to 4 are defined).",
        bytes: B.frame(.setPresence, reqID + [5]), error: .malformed),
    .init(
        name: "change-presence-bad-status",
        description: "CHANGE presence-changed (kind 14) for bob with status 9.",
        bytes: B.frame(.change, B.varint(0) + [14] + B.str("bob") + [9] + [0]), error: .malformed),
    .init(
        name: "change-presence-bad-last-seen-presence",
        description: "CHANGE presence-changed (kind 14) whose lastSeenAt presence byte is 2.",
        bytes: B.frame(.change, B.varint(0) + [14] + B.str("bob") + [0] + [2]), error: .malformed),
    .init(
        name: "search-messages-text-too-long",
        description: "SEARCH_MESSAGES with a text of 257 bytes (the most is 256).",
        bytes: B.frame(
            .searchMessages, reqID + B.str(String(repeating: "t", count: 257)) + [0] + B.varint(1) + B.varint(0)),
        error: .limitExceeded),
    .init(
        name: "search-messages-bad-presence", description: "SEARCH_MESSAGES whose conversation presence byte is 2.",
        bytes: B.frame(.searchMessages, reqID + B.str("tea") + [2] + conv + B.varint(1) + B.varint(0)),
        error: .malformed),
    .init(
        name: "bad-history-policy", description: "FETCH_HISTORY with policy 5.",
        bytes: B.frame(.fetchHistory, reqID + conv + [5, 0]), error: .malformed),
    .init(
        name: "history-page-zero", description: "FETCH_HISTORY page-after with count 0.",
        bytes: B.frame(.fetchHistory, reqID + conv + [3, 0, 0, 0]), error: .invalidArgument),
    .init(
        name: "history-page-too-large", description: "FETCH_HISTORY page-after with count 10,001 (the most is 10,000).",
        bytes: B.frame(.fetchHistory, reqID + conv + [3] + B.varint(10_001) + [0, 0]), error: .invalidArgument),
    .init(
        name: "history-last-zero", description: "FETCH_HISTORY last-N with N = 0.",
        bytes: B.frame(.fetchHistory, reqID + conv + [2, 0, 0]), error: .invalidArgument),
    .init(
        name: "hello-empty-version-range", description: "HELLO with min version 2 > max version 1.",
        bytes: B.frame(.hello, B.u16(2) + B.u16(1) + B.u64(0) + B.str("x")), error: .malformed),
    // SPEC §6.3, §6.5 batches and vectors
    .init(
        name: "batch-too-large", description: "CHANGE_BATCH declaring 257 changes (the limit is 256).",
        bytes: B.frame(.changeBatch, B.varint(257)), error: .limitExceeded),
    .init(
        name: "batch-empty", description: "CHANGE_BATCH with 0 changes.",
        bytes: B.frame(.changeBatch, B.varint(0)), error: .malformed),
    .init(
        name: "version-vector-unsorted", description: "VERSION_VECTOR with nodes 2, 1.",
        bytes: B.frame(.versionVector, B.varint(2) + B.u64(2) + B.varint(1) + B.u64(1) + B.varint(1)),
        error: .nonCanonical),
    .init(
        name: "version-vector-zero-counter",
        description: "VERSION_VECTOR with node 1 at counter 0 (an origin with no operations is left out).",
        bytes: B.frame(.versionVector, B.varint(1) + B.u64(1) + B.varint(0)), error: .nonCanonical),
    .init(
        name: "replicate-empty", description: "REPLICATE with 0 operations.",
        bytes: B.frame(.replicate, B.varint(0)), error: .malformed),
    // SPEC §4.1, §5.1 WELCOME
    .init(
        name: "welcome-over-max",
        description:
            "A WELCOME header declaring 2,049 payload bytes (WELCOME's maximum is 2,048); refused on the header.",
        bytes: B.frame(.welcome, length: 2_049, []), error: .frameTooLarge),
    // SPEC §6.4, §6.5 replicate-only kinds and string maps
    .init(
        name: "change-replicate-only-kind",
        description: "CHANGE whose event kind is 64 (identity): kinds 64 to 69 exist only in REPLICATE.",
        bytes: B.frame(.change, B.varint(1) + [64] + B.str("bob") + [0]), error: .malformed),
    .init(
        name: "change-batch-distinct-created",
        description: "CHANGE_BATCH whose one change has event kind 69 (distinct-created), a REPLICATE-only kind.",
        bytes: B.frame(.changeBatch, B.varint(1) + B.varint(1) + [69]), error: .malformed),
    .init(
        name: "replicate-unknown-kind",
        description: "REPLICATE whose operation has event kind 72 (kinds 0 to 22, 64 to 71, 73 and 74 are defined).",
        bytes: B.replicate([72]), error: .malformed),
    .init(
        name: "replicate-parts-edited-removed-unsorted",
        description: "REPLICATE kind 74 (per-part edit) whose removed part ids B3, B2 are not in ascending order.",
        bytes: B.replicate(
            [74] + conv + msg + B.varint(1) + B.textPart(0xB1, [0x68]) + [0] + B.varint(2) + B.uuid(u(0xB3))
                + B.uuid(u(0xB2)) + B.str("alice") + B.hlc(1_767_225_600_000, 0, 3)), error: .nonCanonical),
    .init(
        name: "replicate-parts-edited-removes-listed",
        description: "REPLICATE kind 74 (per-part edit) that removes part B1, which its list holds.",
        bytes: B.replicate(
            [74] + conv + msg + B.varint(1) + B.textPart(0xB1, [0x68]) + [1] + B.varint(1) + B.uuid(u(0xB1))
                + B.str("alice") + B.hlc(1_767_225_600_000, 0, 3)), error: .malformed),
    .init(
        name: "replicate-parts-edited-duplicate-part",
        description: "REPLICATE kind 74 (per-part edit) whose list names part B1 twice.",
        bytes: B.replicate(
            [74] + conv + msg + B.varint(2) + B.textPart(0xB1, [0x68]) + B.textPart(0xB1, [0x69]) + [1, 0]
                + B.varint(0) + B.str("alice") + B.hlc(1_767_225_600_000, 0, 3)), error: .duplicatePart),
    .init(
        name: "replicate-parts-edited-bad-set-flag",
        description: "REPLICATE kind 74 (per-part edit) whose set flag for part B1 is 02 (not a bool).",
        bytes: B.replicate(
            [74] + conv + msg + B.varint(1) + B.textPart(0xB1, [0x68]) + [2] + B.varint(0) + B.str("alice")
                + B.hlc(1_767_225_600_000, 0, 3)), error: .malformed),
    .init(
        name: "replicate-distinct-not-distinct",
        description: "REPLICATE kind 69 (distinct-created) naming a conversation whose distinct flag is 0.",
        bytes: B.replicate(
            [69] + B.uuid(u(0xC1)) + B.str("alice") + B.varint(0) + [0, 1] + B.varint(1) + B.str("alice") + [0]
                + B.varint(0)), error: .malformed),
    .init(
        name: "identity-bad-presence", description: "REPLICATE kind 64 (identity) whose presence byte is 02.",
        bytes: B.replicate([64] + B.str("bob") + [2]), error: .malformed),
    .init(
        name: "string-map-keys-unsorted",
        description: "REPLICATE kind 64 whose values map has keys last_name, first_name (not in byte order).",
        bytes: B.replicate(
            B.identity(values: B.varint(2) + B.str("last_name") + B.str("B.") + B.str("first_name") + B.str("Bob"))),
        error: .nonCanonical),
    .init(
        name: "string-map-key-repeated", description: "REPLICATE kind 64 whose metadata map has the key team twice.",
        bytes: B.replicate(
            B.identity(
                values: [0], metadata: B.varint(2) + B.str("team") + B.str("blue") + B.str("team") + B.str("red"))),
        error: .nonCanonical),
    .init(
        name: "string-map-key-empty", description: "REPLICATE kind 64 whose values map has an empty key.",
        bytes: B.replicate(B.identity(values: B.varint(1) + B.str("") + B.str("x"))), error: .malformed),
    .init(
        name: "string-map-key-over-limit",
        description: "REPLICATE kind 64 whose values map has a 129-byte key (keys are 1 to 128 bytes).",
        bytes: B.replicate(B.identity(values: B.varint(1) + B.str(String(repeating: "k", count: 129)) + B.str("x"))),
        error: .limitExceeded),
    .init(
        name: "string-map-value-over-limit",
        description: "REPLICATE kind 64 whose metadata map has a 1,025-byte value (values are at most 1,024 bytes).",
        bytes: B.replicate(
            B.identity(values: [0], metadata: B.varint(1) + B.str("k") + B.str(String(repeating: "v", count: 1_025)))),
        error: .limitExceeded),
    .init(
        name: "string-map-too-many-entries",
        description: "REPLICATE kind 64 whose values map declares 257 entries (the most is 256).",
        bytes: B.replicate(B.identity(values: B.varint(257))), error: .limitExceeded),
    .init(
        name: "change-identity-keys-unsorted",
        description:
            "CHANGE identity-changed (kind 12) whose values map has keys display_name, avatar_url (not in byte order).",
        bytes: B.frame(
            .change,
            B.varint(1) + [12] + B.str("bob") + [1] + B.varint(2) + B.str("display_name") + B.str("Bob")
                + B.str("avatar_url") + B.str("https://example.com/b.png") + [0]),
        error: .nonCanonical),
    .init(
        name: "react-bad-op", description: "REACT whose op byte is 2 (only 0 remove and 1 add exist).",
        bytes: B.frame(.react, B.uuid(u(0x1B)) + B.uuid(u(0xC1)) + B.uuid(u(0xA1)) + B.str("+1") + [2]),
        error: .malformed),
    .init(
        name: "react-key-over-limit", description: "REACT whose key is 65 bytes (the limit is 64).",
        bytes: B.frame(
            .react, B.uuid(u(0x1B)) + B.uuid(u(0xC1)) + B.uuid(u(0xA1)) + B.str(String(repeating: "x", count: 65)) + [1]
        ),
        error: .limitExceeded),
    .init(
        name: "change-reactions-empty-key", description: "CHANGE reactions-changed (kind 20) with an empty key.",
        bytes: B.frame(
            .change,
            B.varint(1) + [20] + B.uuid(u(0xC1)) + B.uuid(u(0xA1)) + B.str("bob") + B.str("") + [1]
                + B.hlc(1_767_225_600_900, 0, 1) + B.varint(0)),
        error: .malformed),
    .init(
        name: "change-reactions-present-with-tags",
        description: "CHANGE reactions-changed (kind 20) with present 1 and a removed tag (only a remove names tags).",
        bytes: B.frame(
            .change,
            B.varint(1) + [20] + B.uuid(u(0xC1)) + B.uuid(u(0xA1)) + B.str("bob") + B.str("+1") + [1]
                + B.hlc(1_767_225_600_900, 0, 1) + B.varint(1) + B.hlc(1_767_225_600_800, 0, 1)),
        error: .malformed),
]
