import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire

/// Reactions (SPEC §6.9): REACT from a device (or the Server API on a user's behalf) and kind 20
/// from peers, both decided by LaminaMerge's `ReactionSet` over the rows of one (message, user,
/// key): never the message's row, never another message's reactions.
extension CommandContext {
    /// REACT: an add stamps a tag (unless this node already holds a live one of its own for the
    /// reaction); a remove takes away every live tag this node holds. Participants' feeds get
    /// `reactions-changed` when the reaction's presence changed; what changed a tag is logged
    /// for the peers.
    mutating func react(_ f: React) throws -> Ack {
        let stored = try member(of: f.conversationID)
        do { try ReactionKey.validate(f.key) } catch { throw WireError(error) }
        let message = try message(f.messageID, in: stored.id)
        let ack = Ack(requestID: f.requestID, conversationID: stored.id)
        let reaction = Reaction(user: user, key: f.key)
        let set = try reactionSet(of: reaction, on: message.id)
        let wasPresent = set.contains(reaction)
        let live = set.liveTags(of: reaction)
        let event: ReactionsChanged
        switch f.op {
        case .add:
            // One live tag per node: a repeated add changes nothing, and tags do not pile up.
            guard !live.contains(where: { $0.node == origin }) else { return ack }
            let tag = try engine.nextHLC()
            try tx.addReaction(f.key, by: user, on: message.id, tag: tag)
            event = ReactionsChanged(
                conversationID: stored.id, messageID: message.id, user: user, key: f.key, present: true, at: tag)
        case .remove:
            guard !live.isEmpty else { return ack }
            guard live.count <= ReactionKey.maxRemovedTags else {
                throw WireError(.internalError, "\(live.count) live tags of one reaction: more than a cluster's nodes")
            }
            let at = try engine.nextHLC()
            try tx.removeReactionTags(live, key: f.key, by: user, on: message.id)
            event = ReactionsChanged(
                conversationID: stored.id, messageID: message.id, user: user, key: f.key, present: false, at: at,
                removedTags: live.sorted())
        }
        let op = try FeedCoding.encode(.reactionsChanged(event))
        if event.present != wasPresent {
            try announce(event, in: stored)
            try recordReactionWebhook(event, message: message)
        }
        try replicate(op, at: event.at)
        return ack
    }

    /// Applies a peer's kind 20 by `ReactionSet`'s rule: an add's tag, or a remove's tags, are
    /// recorded (on a message this node holds undeleted); the feeds hear of it when the
    /// reaction's presence changed here.
    mutating func applyReplicatedReaction(_ change: ReactionsChanged, in header: ConversationHeader) throws {
        guard let stored = try tx.read.message(change.messageID), !stored.isDeleted,
            stored.message.conversationID == header.id || stored.message.conversationID == change.conversationID
        else { return }
        let reaction = Reaction(user: change.user, key: change.key)
        let wasPresent = try reactionSet(of: reaction, on: change.messageID).contains(reaction)
        if change.present {
            try tx.addReaction(change.key, by: change.user, on: change.messageID, tag: change.at)
        } else {
            try tx.removeReactionTags(change.removedTags, key: change.key, by: change.user, on: change.messageID)
        }
        let set = try reactionSet(of: reaction, on: change.messageID)
        let isPresent = set.contains(reaction)
        guard isPresent != wasPresent else { return }
        var told = change
        told.conversationID = header.id
        told.present = isPresent
        // The feed's form: an add names no removed tags, a remove the ones it took away here.
        told.removedTags = isPresent ? [] : change.removedTags
        if isPresent { told.at = set.liveTags(of: reaction).max() ?? change.at }
        try announce(told, in: header)
    }

    /// The stored adds of `reaction` on `message`, as LaminaMerge's set.
    private func reactionSet(of reaction: Reaction, on message: MessageID) throws -> ReactionSet {
        var set = ReactionSet()
        let tags = try tx.read.reactionTags(of: reaction.key, by: reaction.user, on: message)
        for stored in tags { set.apply(.added(reaction, tag: stored.tag)) }
        let removed = Set(tags.lazy.filter(\.removed).map(\.tag))
        if !removed.isEmpty { set.apply(.removed(reaction, observed: removed)) }
        return set
    }

    /// Tells a reaction's change to the participants who receive the reacting user's messages.
    private mutating func announce(_ event: ReactionsChanged, in header: ConversationHeader) throws {
        try emit(
            .reactionsChanged(event), to: engine.blockLists.recipients(header.participants, of: event.user),
            conversation: header.id, message: event.messageID)
    }
}

extension NodeEngine {
    /// The reactions present on `messages`, as `reactions-changed` with seq 0 (present, at the
    /// latest live tag): what follows a history page or a snapshot's messages (SPEC §6.9).
    /// Reactions of the users in `blocked` (the reader's block list) are left out, as the live
    /// feed leaves them out (§6.2 block lists).
    static func reactionChanges(_ r: StorageReader, on messages: [Message], hiding blocked: Set<UserID>) throws
        -> [Change]
    {
        guard !messages.isEmpty else { return [] }
        let conversations = Dictionary(messages.map { ($0.id, $0.conversationID) }, uniquingKeysWith: { a, _ in a })
        return try r.presentReactions(on: messages.map(\.id)).compactMap { p in
            guard let conversation = conversations[p.message], !blocked.contains(p.user) else { return nil }
            return Change(
                seq: 0,
                event: .reactionsChanged(
                    ReactionsChanged(
                        conversationID: conversation, messageID: p.message, user: p.user, key: p.key, present: true,
                        at: p.latest)))
        }
    }

    /// The messages a list of changes creates (a snapshot's latest messages).
    static func createdMessages(_ changes: [Change]) -> [Message] {
        changes.compactMap { change in
            if case .messageCreated(let m) = change.event { m } else { nil }
        }
    }
}
