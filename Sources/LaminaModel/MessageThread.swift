/// What a thread's root shows of its replies (SPEC §6.2, replies feature): how many replies
/// not deleted for everyone it has, and the latest of them (LaminaMerge's `ThreadSummary`).
/// A thread is one level deep: a reply names its root, never another reply.
public struct MessageThread: Hashable, Sendable {
    /// Replies not deleted for everyone; at least 1.
    public var replyCount: UInt64
    /// The latest reply not deleted for everyone.
    public var lastReply: MessageID
    /// Its position in the conversation.
    public var lastReplyAt: MessagePosition

    public init(replyCount: UInt64, lastReply: MessageID, lastReplyAt: MessagePosition) {
        self.replyCount = replyCount
        self.lastReply = lastReply
        self.lastReplyAt = lastReplyAt
    }
}
