import Foundation
import LaminaModel
import NIOCore

/// SEARCH_MESSAGES (0x0305), client -> node (search feature, SPEC §5.1 bit 19, §6.3): the
/// messages of the session's user whose text matches `text` (`MessageSearchTerms`: every word,
/// the last one as a prefix), as the user sees history: answered with `message-created`
/// changes with seq 0, best match first, then ACK; or ERROR.
/// ```
/// +------------------+--------------------+---------------------------+-------------------+--------------------+
/// | requestID (uuid) | text (string(256)) | conversationID (opt uuid) | limit (varint32)  | offset (varint32)  |
/// +------------------+--------------------+---------------------------+-------------------+--------------------+
/// ```
/// The decoder checks the text's length (over 256 bytes: `limit-exceeded`, fatal); the node
/// checks its words, `limit` (1 to 200) and `offset + limit` (at most 1,000) and answers a
/// non-fatal `invalid-argument`. The codec carries any page, so whatever decodes re-encodes to
/// the same bytes; the SDK checks the page before it sends.
public struct SearchMessages: Hashable, Sendable {
    public var requestID: UUID
    public var text: String
    /// Only this conversation's messages; nil: every conversation of the user.
    public var conversationID: ConversationID?
    public var limit: UInt32
    public var offset: UInt32

    public init(
        requestID: UUID, text: String, conversationID: ConversationID? = nil, limit: UInt32 = 50, offset: UInt32 = 0
    ) {
        self.requestID = requestID
        self.text = text
        self.conversationID = conversationID
        self.limit = limit
        self.offset = offset
    }

    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeString(text, max: MessageSearchTerms.maxTextBytes, "a search text")
        if let conversationID {
            b.writeInteger(1, as: UInt8.self)
            b.writeID(conversationID)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
        b.writeVarint(UInt64(limit))
        b.writeVarint(UInt64(offset))
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> SearchMessages {
        let id = try b.readUUID("the request id")
        let text = try b.readString(max: MessageSearchTerms.maxTextBytes, "the search text")
        let conversation =
            try b.readPresence("the conversation id") ? try b.readID(ConversationID.self, "the conversation id") : nil
        let limit = try b.readVarint32("the result limit")
        let offset = try b.readVarint32("the result offset")
        return SearchMessages(requestID: id, text: text, conversationID: conversation, limit: limit, offset: offset)
    }
}
