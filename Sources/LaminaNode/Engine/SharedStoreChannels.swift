import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOCore

/// What a node tells the other nodes sharing its store (PostgreSQL) about a channel, once its
/// command committed (SPEC §6.8): an ephemeral notification (`lamina_ephemeral`, body
/// `channel\n<kind>\n…`), so the others deliver a message to their members online and keep
/// their in-memory member lists (``ChannelAudience``) moving with joins and leaves made here.
enum SharedChannelNotice: Equatable {
    /// A message, carried whole (base64 of its kind 18 CHANGE frame): the receiver reads nothing.
    case message(ChannelMessage)
    /// A message too large to carry: the receiver reads that one row of the channel's log.
    case messageAt(ChannelID, logSeq: UInt64)
    case joined(ChannelID, UserID)
    case left(ChannelID, UserID)
    case deleted(ChannelID)

    static let prefix = "channel"

    /// The notification's body; a message too large for a payload is named by its place.
    var body: String {
        switch self {
        case .message(let m):
            guard let frame = try? FeedCoding.encode(.channelMessage(m)) else {
                return Self.messageAt(m.channelID, logSeq: m.logSeq).body
            }
            let body = "\(Self.prefix)\nm\n\(Data(frame).base64EncodedString())"
            // Room for the origin line the listener puts first.
            guard body.utf8.count <= NotificationChannel.maxPayloadBytes - 64 else {
                return Self.messageAt(m.channelID, logSeq: m.logSeq).body
            }
            return body
        case .messageAt(let c, let seq): return "\(Self.prefix)\nr\n\(c.uuid.uuidString)\n\(seq)"
        case .joined(let c, let u): return "\(Self.prefix)\nj\n\(c.uuid.uuidString)\n\(u.rawValue)"
        case .left(let c, let u): return "\(Self.prefix)\nl\n\(c.uuid.uuidString)\n\(u.rawValue)"
        case .deleted(let c): return "\(Self.prefix)\nd\n\(c.uuid.uuidString)"
        }
    }

    /// The notice a body's lines hold (the first is `channel`); nil when it is not one.
    init?(_ lines: [Substring]) {
        guard lines.count >= 3, lines[0] == Self.prefix else { return nil }
        if lines[1] == "m" {
            guard lines.count == 3, let bytes = Data(base64Encoded: String(lines[2])),
                case .change(let change)? = try? Frame.decode(exactly: ByteBuffer(bytes: bytes)),
                case .channelMessage(let message) = change.event
            else { return nil }
            self = .message(message)
            return
        }
        guard let uuid = UUID(uuidString: String(lines[2])) else { return nil }
        let channel = ChannelID(uuid: uuid)
        switch (lines[1], lines.count) {
        case ("d", 3): self = .deleted(channel)
        case ("r", 4):
            guard let seq = UInt64(lines[3]), seq > 0 else { return nil }
            self = .messageAt(channel, logSeq: seq)
        case ("j", 4), ("l", 4):
            guard let user = try? UserID(String(lines[3])) else { return nil }
            self = lines[1] == "j" ? .joined(channel, user) : .left(channel, user)
        default: return nil
        }
    }
}

/// Channels on nodes sharing one PostgreSQL (SPEC §6.8, POSTGRES.md): the node that accepted a
/// message delivers it to its own members online and notifies the others, which deliver it to
/// theirs from the notification (no read per member; a message too large for a notification
/// costs one read of its log row). Joins, leaves and deletions are notified the same way and
/// move each node's member lists; when the listening connection comes back every list is
/// forgotten and read again when next needed, so a notification missed meanwhile leaves no
/// stale list. A notification lost with its node (killed between the commit and the notify)
/// loses only live delivery: members read the shared log by their cursor.
extension NodeEngine {
    /// Tells the other nodes sharing the store (nothing on SQLite).
    func announceChannel(_ notice: SharedChannelNotice) {
        guard store.isShared else { return }
        store.sendEphemeral(notice.body)
        sharedChannelNotices.withLockedValue { $0.sent += 1 }
    }

    /// A notice from another node sharing the store.
    func receiveSharedChannel(_ lines: [Substring]) {
        guard let notice = SharedChannelNotice(lines) else { return }
        sharedChannelNotices.withLockedValue { $0.received += 1 }
        replicationSignal.notify()  // the operations behind it are in the shared log: peer links ship them
        switch notice {
        case .joined(let channel, let user): channelAudience.joined(user, channel)
        case .left(let channel, let user): channelAudience.left(user, channel)
        case .deleted(let channel): channelAudience.deleted(channel)
        case .message(let message): deliverShared(message)
        case .messageAt(let channel, let seq):
            guard registry.onlineUserCount > 0 else { return }
            Task { [self] in
                guard
                    let message = try? await store.read({ r in
                        try r.channelLog(channel, after: seq - 1, limit: 1).first
                    }), message.logSeq == seq
                else { return }
                deliverShared(message)
            }
        }
    }

    /// Delivers another node's message to the members online here: from the member list held,
    /// else after one read of the channel's members (kept for the next messages).
    private func deliverShared(_ message: ChannelMessage) {
        if let members = channelAudience.heldMembers(of: message.channelID) {
            return deliverLive(message, to: members)
        }
        guard registry.onlineUserCount > 0 else { return }
        Task { [self] in
            guard
                let members = try? await store.read({ [channelAudience] r in
                    try channelAudience.members(of: message.channelID) { try r.channelMembers(of: message.channelID) }
                })
            else { return }
            deliverLive(message, to: members)
        }
    }

    /// Tells the other nodes sharing the store what a peer's channel operations changed here,
    /// once they committed (they read the same rows but hold their own member lists and deliver
    /// to their own members online): each message appended, each membership that changed (the
    /// feed entries its user got say so), each deletion.
    func announceReplicatedChannels(_ changes: [FeedChange], messages: [ChannelMessage]) {
        guard store.isShared else { return }
        var deleted: Set<ChannelID> = []
        for change in changes {
            switch change.event {
            case .channelMembershipChanged(let c):
                announceChannel(c.joined ? .joined(c.channelID, c.user) : .left(c.channelID, c.user))
            case .channelDeleted(let d):
                if deleted.insert(d.channelID).inserted { announceChannel(.deleted(d.channelID)) }
            default: break
            }
        }
        for message in messages { announceChannel(.message(message)) }
    }

    /// Channel notices sent to and received from the other nodes sharing the store.
    public var sharedChannelNoticeCounts: (sent: Int, received: Int) {
        sharedChannelNotices.withLockedValue { ($0.sent, $0.received) }
    }
}
