import LaminaMerge
import LaminaModel
import NIOCore

/// REPLICATE kind 69 (SPEC §6.5): a conversation created distinct, with what its origin held
/// when it created it, so that every receiver can tell whether that node had seen another
/// distinct conversation of the same participants (LaminaMerge's `DistinctResolution.classes`).
/// ```
/// +--------------------------------------+--------------------------------------------+
/// | conversation (as kind 0's fields)    | seen (version vector, as VERSION_VECTOR)   |
/// +--------------------------------------+--------------------------------------------+
/// ```
public struct DistinctCreation: Hashable, Sendable {
    /// The conversation as created (distinct).
    public var conversation: Conversation
    /// The origin's version vector when it created the conversation (the creation excluded).
    public var seen: VersionVector

    public init(conversation: Conversation, seen: VersionVector) {
        self.conversation = conversation
        self.seen = seen
    }

    /// The REPLICATE event kind.
    public static let kind: UInt8 = 69

    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard conversation.isDistinct else {
            throw WireError(.invalidArgument, "a distinct creation names a distinct conversation")
        }
        b.writeInteger(Self.kind, as: UInt8.self)
        try b.writeConversation(conversation)
        try seen.encode(into: &b)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> DistinctCreation {
        guard try b.readU8("the event kind") == kind else { throw WireError(.malformed, "not a distinct creation") }
        let conversation = try b.readConversation(limits)
        guard conversation.isDistinct else {
            throw WireError(.malformed, "a distinct creation (kind 69) names a conversation that is not distinct")
        }
        return DistinctCreation(conversation: conversation, seen: try VersionVector.decode(from: &b, limits))
    }
}
