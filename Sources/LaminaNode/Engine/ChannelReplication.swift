import Foundation
import LaminaModel
import LaminaStore
import LaminaWire

/// Channels across peer nodes (SPEC §6.8): a peer's channel operation (REPLICATE kinds 16 to
/// 19) applied through the same rules as this node's commands. Every operation is idempotent
/// and the result does not depend on the order of arrival: a creation stores the channel once;
/// a join or leave goes through LaminaMerge's `ChannelMembership` (store:
/// `applyChannelMembership`); a message is appended to this node's log once (by id) with this
/// node's own `logSeq`; a deletion absorbs everything after it. An operation naming a channel
/// this node does not hold, or holds deleted, changes nothing (causes precede effects on every
/// link, so a live channel's creation always arrives first).
extension CommandContext {
    /// Applies one replicated channel operation; returns what the log keeps of it.
    mutating func applyChannelEvent(_ event: ChangeEvent) throws -> [UInt8] {
        switch event {
        case .channelCreated(let channel):
            _ = try tx.insertReplicatedChannel(channel)
        case .channelMembershipChanged(let change):
            guard let record = try tx.read.channel(change.channelID), !record.isDeleted,
                try tx.applyChannelMembership(
                    change.user, joined: change.joined, at: change.at, in: change.channelID, now: now)
            else { break }
            if change.joined {
                try emit(.channelCreated(record.channel), to: [change.user], conversation: nil)
                engine.channelAudience.joined(change.user, change.channelID)
            } else {
                engine.channelAudience.left(change.user, change.channelID)
            }
            try emit(.channelMembershipChanged(change), to: [change.user], conversation: nil)
        case .channelMessage(var message):
            message.logSeq = 0
            let logged = try FeedCoding.encode(.channelMessage(message))
            guard try tx.read.channelMessage(message.id) == nil,
                let record = try tx.read.channel(message.channelID), !record.isDeleted
            else { return logged }
            let members = try engine.channelAudience.members(of: message.channelID) {
                try tx.read.channelMembers(of: message.channelID)
            }
            channelMessagesToDeliver.append((try tx.appendChannelMessage(message), members))
            // Its rich content stays on the node that accepted it until this node fetches it
            // (Protocol/CONTENT.md §9, as for a conversation's message).
            for part in message.parts {
                if case .external(let reference) = part.content {
                    try tx.expectReplicatedContent(reference, owner: message.sender, at: now)
                }
            }
            return logged
        case .channelDeleted(let deletion):
            guard let members = try tx.deleteChannel(deletion.channelID) else { break }
            try emit(.channelDeleted(deletion), to: Set(members), conversation: nil)
            engine.channelAudience.deleted(deletion.channelID)
        default:
            throw WireError(.internalError, "a \(event.kind) change is not a channel operation")
        }
        return try FeedCoding.encode(event)
    }
}
