import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// The members of channels, kept in memory for live delivery (SPEC §6.8): a channel's set is
/// read from the store inside the writer's transaction the first time a message is sent to it,
/// and moved by this node's joins, leaves and deletions inside theirs, so it follows the
/// writer's order. A send then reaches the members online without reading the membership.
final class ChannelAudience: Sendable {
    private let members = NIOLockedValueBox<[ChannelID: Set<UserID>]>([:])

    /// The members of `channel`, reading them with `load` when not held yet.
    func members(of channel: ChannelID, load: () throws -> [UserID]) rethrows -> Set<UserID> {
        if let held = members.withLockedValue({ $0[channel] }) { return held }
        let loaded = Set(try load())
        members.withLockedValue { $0[channel] = loaded }
        return loaded
    }

    func joined(_ user: UserID, _ channel: ChannelID) {
        members.withLockedValue { _ = $0[channel]?.insert(user) }
    }

    func left(_ user: UserID, _ channel: ChannelID) {
        members.withLockedValue { _ = $0[channel]?.remove(user) }
    }

    func deleted(_ channel: ChannelID) {
        members.withLockedValue { $0[channel] = nil }
    }
}

/// Channels (SPEC §6.8): Layer's large named rooms. A message is stored once, in the channel's
/// log; members read the log by their own cursor (FETCH_CHANNEL) and the members online get it
/// live; no feed entry, receipt or unread count is written per member per message. Joins,
/// leaves and deletions reach the feed of the member concerned.
extension NodeEngine {
    /// What a channel command did, for its answer.
    enum ChannelOutcome: Sendable, Equatable {
        case done(Ack)
        case refused(WireError)
    }

    /// CREATE_CHANNEL by `user` (or the Server API's system sender): the creator is the first
    /// member (a system sender is not). A retry by the same user with the same name is
    /// answered as the first time.
    func createChannel(_ id: ChannelID, named name: ChannelName, by user: UserID) async throws -> ChannelOutcome {
        let (outcome, changes) = try await store.write { [self] tx -> (ChannelOutcome, [FeedChange]) in
            let now = Timestamp.now()
            let channel = ChatChannel(id: id, name: name, creator: user, createdAt: now)
            switch try tx.createChannel(channel) {
            case .idExists(let existing):
                guard existing.channel.creator == user, existing.channel.name == name, !existing.isDeleted else {
                    return (.refused(WireError(.idInUse, "channel id \(id) is in use")), [])
                }
                return (.done(Ack(requestID: id.uuid, timestamp: existing.channel.createdAt)), [])
            case .nameTaken:
                return (.refused(WireError(.idInUse, "the channel name '\(name)' is taken")), [])
            case .created:
                var context = CommandContext(tx: tx, user: user, engine: self, now: now)
                let creatorJoins = !user.isSystemSender
                try recordChannelWebhook(
                    .channelCreated, channel, memberCount: creatorJoins ? 1 : 0, by: user, in: tx, at: now)
                if creatorJoins {
                    try tx.addChannelMember(user, to: id, at: now)
                    try emitJoin(channel, user: user, by: user, in: &context)
                    try recordMembershipWebhook(.membershipCreated, user, of: id, by: user, in: tx, at: now)
                }
                return (.done(Ack(requestID: id.uuid, timestamp: now)), context.changes)
            }
        }
        publish(changes)
        return outcome
    }

    /// JOIN_CHANNEL (`by` == `user`) or the Server API's add: at most the node's member limit.
    /// Joining a channel one is a member of changes nothing. The ACK's `cursor` is the
    /// channel's log head: the member reads the shared history from any cursor up to it.
    func joinChannel(_ id: ChannelID, user: UserID, by actor: UserID, requestID: UUID) async throws -> ChannelOutcome {
        let limit = configuration.maxChannelMembers
        let (outcome, changes) = try await store.write { [self] tx -> (ChannelOutcome, [FeedChange]) in
            guard let record = try tx.read.channel(id), !record.isDeleted else {
                return (.refused(WireError(.notFound, "no channel \(id)")), [])
            }
            let ack = Ack(requestID: requestID, cursor: record.head)
            if try tx.read.isChannelMember(user, of: id) { return (.done(ack), []) }
            guard record.memberCount < limit else {
                return (
                    .refused(
                        WireError(.tooManyParticipants, "channel \(id) has \(record.memberCount) members (the most)")),
                    []
                )
            }
            let now = Timestamp.now()
            try tx.addChannelMember(user, to: id, at: now)
            var context = CommandContext(tx: tx, user: actor, engine: self, now: now)
            try emitJoin(record.channel, user: user, by: actor, in: &context)
            try recordMembershipWebhook(.membershipCreated, user, of: id, by: actor, in: tx, at: now)
            channelAudience.joined(user, id)
            return (.done(ack), context.changes)
        }
        publish(changes)
        return outcome
    }

    /// LEAVE_CHANNEL (`by` == `user`) or the Server API's remove. Leaving a channel one is not
    /// a member of changes nothing.
    func leaveChannel(_ id: ChannelID, user: UserID, by actor: UserID, requestID: UUID) async throws -> ChannelOutcome {
        let (outcome, changes) = try await store.write { [self] tx -> (ChannelOutcome, [FeedChange]) in
            guard let record = try tx.read.channel(id), !record.isDeleted else {
                return (.refused(WireError(.notFound, "no channel \(id)")), [])
            }
            let ack = Ack(requestID: requestID)
            guard try tx.removeChannelMember(user, from: id) else { return (.done(ack), []) }
            let now = Timestamp.now()
            var context = CommandContext(tx: tx, user: actor, engine: self, now: now)
            try context.emit(
                .channelMembershipChanged(
                    ChannelMembershipChanged(channelID: id, user: user, joined: false, by: actor, at: try nextHLC())),
                to: [user], conversation: nil)
            try recordMembershipWebhook(.membershipDeleted, user, of: id, by: actor, in: tx, at: now)
            channelAudience.left(user, id)
            return (.done(ack), context.changes)
        }
        publish(changes)
        return outcome
    }

    /// SEND_CHANNEL_MESSAGE: members only (a system sender, the Server API, to any live
    /// channel); parts inline. One row written whatever the member count; every session of
    /// the members online here gets it live (the sender's too: a device stores its channel
    /// messages as they come, after the ACK).
    func sendChannelMessage(_ f: SendChannelMessage, by user: UserID) async throws
        -> ChannelOutcome
    {
        for part in f.parts {
            if case .external = part.content {
                return .refused(
                    WireError(.invalidArgument, "a channel message's parts are inline in this version (SPEC §6.8)"))
            }
        }
        let (outcome, delivery) = try await store.write {
            [self] tx -> (ChannelOutcome, (ChannelMessage, Set<UserID>)?) in
            if let sent = try tx.read.channelMessage(f.messageID) {
                guard sent.sender == user, sent.channelID == f.channelID, sent.parts == f.parts else {
                    return (.refused(WireError(.idInUse, "message id \(f.messageID) is in use")), nil)
                }
                return (.done(Self.ack(for: sent)), nil)
            }
            guard let record = try tx.read.channel(f.channelID), !record.isDeleted else {
                return (.refused(WireError(.notFound, "no channel \(f.channelID)")), nil)
            }
            let members = try channelAudience.members(of: f.channelID) {
                try tx.read.channelMembers(of: f.channelID)
            }
            // The store decides who may send (joins through other nodes on a shared store
            // included); the in-memory list only whom this node delivers to live.
            guard try user.isSystemSender || tx.read.isChannelMember(user, of: f.channelID) else {
                return (.refused(WireError(.notAParticipant, "\(user) is not a member of \(f.channelID)")), nil)
            }
            let message = ChannelMessage(
                id: f.messageID, channelID: f.channelID, sender: user, sentAt: .now(), position: try nextHLC(),
                logSeq: 0, parts: f.parts)
            let stored = try tx.appendChannelMessage(message)
            try recordChannelMessageWebhook(stored, in: tx)
            return (.done(Self.ack(for: stored)), (stored, members))
        }
        if let (message, members) = delivery { deliverLive(message, to: members) }
        return outcome
    }

    private static func ack(for message: ChannelMessage) -> Ack {
        Ack(requestID: message.id.uuid, position: message.position, timestamp: message.sentAt, cursor: message.logSeq)
    }

    /// Sends `message` to the sessions of the members online here: the cost is the smaller of
    /// the members and the users online, never a read of the membership.
    private func deliverLive(_ message: ChannelMessage, to members: Set<UserID>) {
        guard let shared = try? SharedChangeEvent(.channelMessage(message)) else { return }
        let change = Change(seq: 0, shared: shared)
        let audience: Set<UserID>
        if registry.onlineUserCount < members.count {
            audience = Set(registry.onlineUsers().filter(members.contains))
        } else {
            audience = members
        }
        relayLocally(change, to: audience, except: nil)
        channelDeliveries.add(audience.count)
    }

    /// FETCH_CHANNEL: up to `count` (1 to 10,000) messages of the log after `after`, for members.
    func fetchChannel(_ f: FetchChannel, by user: UserID) async throws -> Result<[ChannelMessage], WireError> {
        guard (1...FetchChannel.maxCount).contains(f.count) else {
            return .failure(
                WireError(
                    .invalidArgument, "FETCH_CHANNEL asks for 1 to \(FetchChannel.maxCount) messages, not \(f.count)"))
        }
        return try await store.read { r -> Result<[ChannelMessage], WireError> in
            guard let record = try r.channel(f.channelID), !record.isDeleted else {
                return .failure(WireError(.notFound, "no channel \(f.channelID)"))
            }
            guard try user.isSystemSender || r.isChannelMember(user, of: f.channelID) else {
                return .failure(WireError(.notAParticipant, "\(user) is not a member of \(f.channelID)"))
            }
            return .success(try r.channelLog(f.channelID, after: f.after, limit: Int(f.count)))
        }
    }

    /// DELETE_CHANNEL: by its creator (or the Server API). Every member's feed gets
    /// `channel-deleted`; the messages go.
    func deleteChannel(_ id: ChannelID, by user: UserID, requestID: UUID) async throws -> ChannelOutcome {
        let (outcome, changes) = try await store.write { [self] tx -> (ChannelOutcome, [FeedChange]) in
            guard let record = try tx.read.channel(id), !record.isDeleted else {
                return (.refused(WireError(.notFound, "no channel \(id)")), [])
            }
            guard user.isSystemSender || record.channel.creator == user else {
                return (.refused(WireError(.forbidden, "only the creator of \(id) may delete it")), [])
            }
            let now = Timestamp.now()
            let members = try tx.deleteChannel(id) ?? []
            try recordChannelWebhook(
                .channelDeleted, record.channel, memberCount: record.memberCount, by: user, in: tx, at: now)
            var context = CommandContext(tx: tx, user: user, engine: self, now: now)
            try context.emit(
                .channelDeleted(ChannelDeleted(channelID: id, by: user, at: try nextHLC())), to: Set(members),
                conversation: nil)
            channelAudience.deleted(id)
            return (.done(Ack(requestID: requestID)), context.changes)
        }
        publish(changes)
        return outcome
    }

    /// The live channels `user` is a member of.
    func channels(of user: UserID) async throws -> [ChannelRecord] {
        try await store.read { r in try r.channels(of: user) }
    }

    /// A new member's feed: the channel (kind 16), then their membership (kind 17).
    private func emitJoin(_ channel: ChatChannel, user: UserID, by actor: UserID, in context: inout CommandContext)
        throws
    {
        try context.emit(.channelCreated(channel), to: [user], conversation: nil)
        try context.emit(
            .channelMembershipChanged(
                ChannelMembershipChanged(channelID: channel.id, user: user, joined: true, by: actor, at: try nextHLC())),
            to: [user], conversation: nil)
    }
}

/// Channel messages delivered live since the start (one per member session's user reached).
public final class ChannelDeliveryCounts: Sendable {
    private let total = NIOLockedValueBox<Int>(0)
    func add(_ n: Int) { total.withLockedValue { $0 += n } }
    /// Users reached by live channel messages since the start.
    public var delivered: Int { total.withLockedValue { $0 } }
}

extension NodeSession {
    /// The channel commands (SPEC §6.8), each answered in order with ACK or a non-fatal ERROR.
    func handleChannelCommand(_ frame: Frame, as auth: Auth) async {
        let requestID = frame.commandID
        do {
            let outcome: NodeEngine.ChannelOutcome
            switch frame {
            case .createChannel(let f):
                outcome = try await engine.createChannel(f.channelID, named: f.name, by: auth.user)
            case .joinChannel(let f):
                outcome = try await engine.joinChannel(
                    f.channelID, user: auth.user, by: auth.user, requestID: f.requestID)
            case .leaveChannel(let f):
                outcome = try await engine.leaveChannel(
                    f.channelID, user: auth.user, by: auth.user, requestID: f.requestID)
            case .sendChannelMessage(let f):
                outcome = try await engine.sendChannelMessage(f, by: auth.user)
            case .deleteChannel(let f):
                outcome = try await engine.deleteChannel(f.channelID, by: auth.user, requestID: f.requestID)
            case .fetchChannel(let f):
                switch try await engine.fetchChannel(f, by: auth.user) {
                case .failure(let error): return reply(error, requestID: f.requestID)
                case .success(let messages):
                    let features = state.withLockedValue { $0.features }
                    let changes = try messages.map { m throws(WireError) in
                        Change(seq: 0, shared: try SharedChangeEvent(.channelMessage(m)))
                    }
                    guard await sendPaced(FeedCoding.frames(changes, for: features)) else { return }
                    send(.ack(Ack(requestID: f.requestID, cursor: messages.last?.logSeq ?? f.after)))
                    return
                }
            default:
                return reply(
                    WireError(.unexpectedFrame, "\(frame.type.name) is not a channel command"), requestID: requestID)
            }
            switch outcome {
            case .done(let ack): send(.ack(ack))
            case .refused(let error): reply(error, requestID: requestID)
            }
        } catch {
            reply(EngineErrors.wire(error), requestID: requestID)
        }
    }
}
