import Foundation
import LaminaMerge
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// The members of channels, kept in memory for live delivery (SPEC §6.8): a channel's set is
/// read from the store the first time a message is to be delivered for it (inside the writer's
/// transaction for a send here), and moved by this node's joins, leaves and deletions inside
/// theirs, by those of its peers as they apply, and by those of the nodes sharing its store as
/// their notifications arrive. A send then reaches the members online without reading the
/// membership.
final class ChannelAudience: Sendable {
    private struct State {
        var members: [ChannelID: Set<UserID>] = [:]
        /// Moves per channel, counted even while its set is not held: a set read outside the
        /// writer is kept only when no move came while it was read.
        var moves: [ChannelID: UInt64] = [:]
    }
    private let state = NIOLockedValueBox(State())

    /// The members of `channel`, reading them with `load` when not held yet.
    func members(of channel: ChannelID, load: () throws -> [UserID]) rethrows -> Set<UserID> {
        let (held, moves) = state.withLockedValue { ($0.members[channel], $0.moves[channel, default: 0]) }
        if let held { return held }
        let loaded = Set(try load())
        state.withLockedValue { s in
            if s.moves[channel, default: 0] == moves { s.members[channel] = loaded }
        }
        return loaded
    }

    /// The members of `channel` when held (no read).
    func heldMembers(of channel: ChannelID) -> Set<UserID>? {
        state.withLockedValue { $0.members[channel] }
    }

    func joined(_ user: UserID, _ channel: ChannelID) {
        state.withLockedValue { s in
            s.moves[channel, default: 0] &+= 1
            _ = s.members[channel]?.insert(user)
        }
    }

    func left(_ user: UserID, _ channel: ChannelID) {
        state.withLockedValue { s in
            s.moves[channel, default: 0] &+= 1
            _ = s.members[channel]?.remove(user)
        }
    }

    func deleted(_ channel: ChannelID) {
        state.withLockedValue { s in
            s.moves[channel, default: 0] &+= 1
            s.members[channel] = nil
        }
    }

    /// Forgets every set (each is read again when next needed): moves made on other nodes
    /// sharing the store may have been missed while their notifications could not arrive.
    func forgetAll() {
        state.withLockedValue { s in
            for channel in s.members.keys { s.moves[channel, default: 0] &+= 1 }
            s.members = [:]
        }
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
                try context.replicate(try FeedCoding.encode(.channelCreated(channel)), at: try nextHLC())
                let creatorJoins = !user.isSystemSender
                try recordChannelWebhook(
                    .channelCreated, channel, memberCount: creatorJoins ? 1 : 0, by: user, in: tx, at: now)
                if creatorJoins {
                    let at = try nextHLC()
                    _ = try tx.applyChannelMembership(user, joined: true, at: at, in: id, now: now)
                    try context.replicate(try emitJoin(channel, user: user, by: user, at: at, in: &context), at: at)
                    try recordMembershipWebhook(.membershipCreated, user, of: id, by: user, in: tx, at: now)
                }
                return (.done(Ack(requestID: id.uuid, timestamp: now)), context.changes)
            }
        }
        publish(changes)
        if case .done = outcome, !user.isSystemSender, !changes.isEmpty {
            announceChannel(.joined(id, user))
        }
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
            let at = try nextHLC()
            _ = try tx.applyChannelMembership(user, joined: true, at: at, in: id, now: now)
            var context = CommandContext(tx: tx, user: actor, engine: self, now: now)
            try context.replicate(try emitJoin(record.channel, user: user, by: actor, at: at, in: &context), at: at)
            try recordMembershipWebhook(.membershipCreated, user, of: id, by: actor, in: tx, at: now)
            channelAudience.joined(user, id)
            return (.done(ack), context.changes)
        }
        publish(changes)
        if !changes.isEmpty { announceChannel(.joined(id, user)) }
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
            // Not a member: nothing is written or replicated (a leave recorded here alone could
            // outweigh a peer's join that its node keeps).
            guard try tx.read.isChannelMember(user, of: id) else { return (.done(ack), []) }
            let now = Timestamp.now()
            let at = try nextHLC()
            guard try tx.applyChannelMembership(user, joined: false, at: at, in: id, now: now) else {
                throw WireError(.internalError, "\(user)'s leave of \(id) at \(at) did not apply")
            }
            var context = CommandContext(tx: tx, user: actor, engine: self, now: now)
            let payload = try context.emit(
                .channelMembershipChanged(
                    ChannelMembershipChanged(channelID: id, user: user, joined: false, by: actor, at: at)),
                to: [user], conversation: nil)
            try context.replicate(payload, at: at)
            try recordMembershipWebhook(.membershipDeleted, user, of: id, by: actor, in: tx, at: now)
            channelAudience.left(user, id)
            return (.done(ack), context.changes)
        }
        publish(changes)
        if !changes.isEmpty { announceChannel(.left(id, user)) }
        return outcome
    }

    /// SEND_CHANNEL_MESSAGE: members only (a system sender, the Server API, to any live
    /// channel); parts inline or referencing content the sender uploaded (or, with
    /// `contentOwner`, the Server API's backend). One row written whatever the member count
    /// (and one link per referenced content); every session of the members online here gets it
    /// live (the sender's too: a device stores its channel messages as they come, after the ACK).
    func sendChannelMessage(_ f: SendChannelMessage, by user: UserID, contentOwner: UserID? = nil) async throws
        -> ChannelOutcome
    {
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
            if let refused = try ContentReferenceCheck.check(
                f.parts, sender: user, contentOwner: contentOwner, in: tx.read)
            {
                return (.refused(refused), nil)
            }
            let message = ChannelMessage(
                id: f.messageID, channelID: f.channelID, sender: user, sentAt: .now(), position: try nextHLC(),
                logSeq: 0, parts: f.parts)
            let stored = try tx.appendChannelMessage(message)
            // Logged with `logSeq` 0: every receiver numbers its own log (SPEC §6.8).
            _ = try tx.appendLocalOperation(
                try FeedCoding.encode(.channelMessage(message)), origin: configuration.nodeID, hlc: message.position)
            try recordChannelMessageWebhook(stored, in: tx)
            return (.done(Self.ack(for: stored)), (stored, members))
        }
        if let (message, members) = delivery {
            replicationSignal.notify()
            deliverLive(message, to: members)
            announceChannel(.message(message))
        }
        return outcome
    }

    private static func ack(for message: ChannelMessage) -> Ack {
        Ack(requestID: message.id.uuid, position: message.position, timestamp: message.sentAt, cursor: message.logSeq)
    }

    /// Sends `message` to the sessions of the members online here: the cost is the smaller of
    /// the members and the users online, never a read of the membership.
    func deliverLive(_ message: ChannelMessage, to members: Set<UserID>) {
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
            let at = try nextHLC()
            let payload = try context.emit(
                .channelDeleted(ChannelDeleted(channelID: id, by: user, at: at)), to: Set(members), conversation: nil)
            try context.replicate(payload, at: at)
            channelAudience.deleted(id)
            return (.done(Ack(requestID: requestID)), context.changes)
        }
        publish(changes)
        if case .done = outcome { announceChannel(.deleted(id)) }
        return outcome
    }

    /// The live channels `user` is a member of.
    func channels(of user: UserID) async throws -> [ChannelRecord] {
        try await store.read { r in try r.channels(of: user) }
    }

    /// A new member's feed: the channel (kind 16), then their membership (kind 17, at `at`).
    /// Returns the membership change's encoding (what the replication log keeps of a join).
    func emitJoin(
        _ channel: ChatChannel, user: UserID, by actor: UserID, at: HLCTimestamp, in context: inout CommandContext
    ) throws -> [UInt8] {
        try context.emit(.channelCreated(channel), to: [user], conversation: nil)
        return try context.emit(
            .channelMembershipChanged(
                ChannelMembershipChanged(channelID: channel.id, user: user, joined: true, by: actor, at: at)),
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
