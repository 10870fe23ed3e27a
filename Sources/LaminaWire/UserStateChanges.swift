import Foundation
import LaminaModel
import NIOCore

/// State about users, outside conversations, that peers replicate (SPEC §6.5): what the Server
/// API sets, and whom users follow. Kinds 64...68 and 70 of a replicated operation's event;
/// never in a client's feed.
/// Each is a last-writer-wins register, decided by the operation's HLC reading.
public enum UserStateChange: Hashable, Sendable {
    /// kind 64: `user`'s identity as the Server API set it, or deleted (`identity` nil).
    case identity(IdentityChange)
    /// kind 65: `blocker` blocks `blocked`, or no longer does.
    case block(BlockChange)
    /// kind 66: `user`'s badge (the unread count the app backend keeps).
    case badge(BadgeChange)
    /// kind 67: every session of `user` authenticated before the operation's time is revoked.
    case sessionsRevoked(UserID)
    /// kind 68: a device registered (or removed) its push token on a node, which now holds
    /// that device's pushes; the other nodes drop their registration of it (SPEC §5.9).
    case pushRegistration(PushRegistrationChange)
    /// kind 70: `user` is suspended (cannot log in) or no longer is.
    case suspension(SuspensionChange)
    /// kind 71: `follower` follows `followed` explicitly, or no longer does (SPEC §6.7).
    case follow(FollowChange)
    /// kind 73: `user`'s notification level of a conversation (SPEC §6.10).
    case notificationLevel(NotificationLevelChange)

    /// The event's `kind` byte.
    public var kind: UInt8 {
        switch self {
        case .identity: 64
        case .block: 65
        case .badge: 66
        case .sessionsRevoked: 67
        case .pushRegistration: 68
        case .suspension: 70
        case .follow: 71
        case .notificationLevel: 73
        }
    }

    /// The kinds this enum encodes (69 is a distinct creation, ``DistinctCreation``).
    public static func isUserStateKind(_ kind: UInt8) -> Bool {
        (64...68).contains(kind) || kind == 70 || kind == 71 || kind == 73
    }
}

/// kind 70: `| user id | suspended (bool) |`.
public struct SuspensionChange: Hashable, Sendable {
    public var user: UserID
    public var suspended: Bool
    public init(user: UserID, suspended: Bool) {
        self.user = user
        self.suspended = suspended
    }
}

/// kind 64: an identity set or deleted.
/// ```
/// +---------+-----------------+------------------------------+--------------------------+
/// | user id | present (u8)    | present: values (string map) | present: metadata (map)  |
/// +---------+-----------------+------------------------------+--------------------------+
/// ```
/// A string map is a count (varint, at most `maxMetadataEntries`), then that many key
/// (string, 1...`maxMetadataKeyBytes`) and value (string, at most `maxTextBytes`) pairs in
/// strictly ascending key order (UTF-8 bytes).
public struct IdentityChange: Hashable, Sendable {
    public var user: UserID
    /// The identity's string properties by their Platform API names, and its metadata; nil: deleted.
    public var identity: Identity?

    public struct Identity: Hashable, Sendable {
        public var values: [String: String]
        public var metadata: [String: String]
        public init(values: [String: String] = [:], metadata: [String: String] = [:]) {
            self.values = values
            self.metadata = metadata
        }
    }

    public init(user: UserID, identity: Identity?) {
        self.user = user
        self.identity = identity
    }
}

/// kind 65: `| blocker (user id) | blocked (user id) | blocking (bool) |`.
public struct BlockChange: Hashable, Sendable {
    public var blocker: UserID
    public var blocked: UserID
    public var blocking: Bool
    public init(blocker: UserID, blocked: UserID, blocking: Bool) {
        self.blocker = blocker
        self.blocked = blocked
        self.blocking = blocking
    }
}

/// kind 71: `| follower (user id) | followed (user id) | following (bool) |`.
public struct FollowChange: Hashable, Sendable {
    public var follower: UserID
    public var followed: UserID
    public var following: Bool
    public init(follower: UserID, followed: UserID, following: Bool) {
        self.follower = follower
        self.followed = followed
        self.following = following
    }
}

/// kind 66: `| user id | external unread count (varint) |`.
public struct BadgeChange: Hashable, Sendable {
    public var user: UserID
    public var externalUnreadCount: UInt64
    public init(user: UserID, externalUnreadCount: UInt64) {
        self.user = user
        self.externalUnreadCount = externalUnreadCount
    }
}

/// kind 68: `| user id | device (uuid) | node (u64) |`: the device's push token (or its
/// removal) was registered on `node`.
public struct PushRegistrationChange: Hashable, Sendable {
    public var user: UserID
    public var device: UUID
    public var node: NodeID
    public init(user: UserID, device: UUID, node: NodeID) {
        self.user = user
        self.device = device
        self.node = node
    }
}

/// What a replicated operation did: a change of a conversation (the feed's events, §6.4) or of
/// a user's state (kinds 64...68, 70 and 71), or a distinct conversation's creation with what its
/// origin had seen (kind 69).
public enum ReplicatedEvent: Hashable, Sendable {
    case change(ChangeEvent)
    case user(UserStateChange)
    case distinctCreation(DistinctCreation)
    /// kind 74: an edit of a message's parts, per part (to peers with feature bit 20).
    case partsEdited(MessagePartsEdited)

    public var kind: UInt8 {
        switch self {
        case .change(let e): e.kind
        case .user(let u): u.kind
        case .distinctCreation: DistinctCreation.kind
        case .partsEdited: MessagePartsEdited.kind
        }
    }
}

// MARK: - Codec

extension ReplicatedEvent {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        switch self {
        case .change(let e): try e.encode(into: &b)
        case .user(let u): try u.encode(into: &b)
        case .distinctCreation(let d): try d.encode(into: &b)
        case .partsEdited(let e): try e.encode(into: &b)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ReplicatedEvent {
        let kind = try b.peekU8("the event kind")
        if kind == DistinctCreation.kind { return .distinctCreation(try DistinctCreation.decode(from: &b, limits)) }
        if kind == MessagePartsEdited.kind { return .partsEdited(try MessagePartsEdited.decode(from: &b, limits)) }
        return UserStateChange.isUserStateKind(kind)
            ? .user(try UserStateChange.decode(from: &b, limits)) : .change(try ChangeEvent.decode(from: &b, limits))
    }

    /// The event's bytes alone (the node's replication log keeps user-state operations so).
    public func encoded() throws(WireError) -> [UInt8] {
        var b = ByteBuffer()
        try encode(into: &b)
        return Array(b.readableBytesView)
    }

    /// Decodes exactly one event from `bytes` (no trailing bytes).
    public static func decode(exactly bytes: [UInt8], limits: WireLimits = .default) throws(WireError)
        -> ReplicatedEvent
    {
        let result = bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<ReplicatedEvent, WireError> in
            do throws(WireError) {
                var reader = PayloadReader(raw)
                let event = try decode(from: &reader, limits)
                guard reader.readableBytes == 0 else {
                    throw WireError(.trailingBytes, "\(reader.readableBytes) bytes after the event")
                }
                return .success(event)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

extension UserStateChange {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeInteger(kind, as: UInt8.self)
        switch self {
        case .identity(let i):
            try b.writeIdentityChange(i)
        case .block(let c):
            try b.writeUserID(c.blocker)
            try b.writeUserID(c.blocked)
            b.writeBool(c.blocking)
        case .badge(let c):
            try b.writeUserID(c.user)
            b.writeVarint(c.externalUnreadCount)
        case .sessionsRevoked(let user):
            try b.writeUserID(user)
        case .pushRegistration(let r):
            try b.writeUserID(r.user)
            b.writeUUID(r.device)
            b.writeInteger(r.node.rawValue, as: UInt64.self)
        case .suspension(let s):
            try b.writeUserID(s.user)
            b.writeBool(s.suspended)
        case .follow(let f):
            try b.writeUserID(f.follower)
            try b.writeUserID(f.followed)
            b.writeBool(f.following)
        case .notificationLevel(let n):
            try b.writeUserID(n.user)
            b.writeID(n.conversationID)
            b.writeNotificationLevel(n.level, until: n.until)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> UserStateChange {
        let kind = try b.readU8("the event kind")
        switch kind {
        case 64:
            return .identity(try b.readIdentityChange(limits))
        case 65:
            let blocker = try b.readUserID(limits)
            let blocked = try b.readUserID(limits)
            return .block(
                BlockChange(blocker: blocker, blocked: blocked, blocking: try b.readBool("the blocking flag")))
        case 66:
            let user = try b.readUserID(limits)
            return .badge(BadgeChange(user: user, externalUnreadCount: try b.readVarint("the external unread count")))
        case 67:
            return .sessionsRevoked(try b.readUserID(limits))
        case 68:
            let user = try b.readUserID(limits)
            let device = try b.readUUID("the device id")
            return .pushRegistration(
                PushRegistrationChange(user: user, device: device, node: NodeID(try b.readU64("the node id"))))
        case 70:
            let user = try b.readUserID(limits)
            return .suspension(SuspensionChange(user: user, suspended: try b.readBool("the suspended flag")))
        case 71:
            let follower = try b.readUserID(limits)
            let followed = try b.readUserID(limits)
            return .follow(
                FollowChange(follower: follower, followed: followed, following: try b.readBool("the following flag")))
        case 73:
            let user = try b.readUserID(limits)
            let conversation = try b.readID(ConversationID.self, "the conversation id")
            let (level, until) = try b.readNotificationLevel()
            return .notificationLevel(
                NotificationLevelChange(user: user, conversationID: conversation, level: level, until: until))
        default:
            throw WireError(.malformed, "unknown user-state kind \(kind)")
        }
    }
}

extension ByteBuffer {
    /// An identity change: user, then presence and the values and metadata string maps.
    mutating func writeIdentityChange(_ i: IdentityChange) throws(WireError) {
        try writeUserID(i.user)
        if let identity = i.identity {
            writeInteger(1, as: UInt8.self)
            try writeStringMap(identity.values, "an identity value")
            try writeStringMap(identity.metadata, "an identity metadata value")
        } else {
            writeInteger(0, as: UInt8.self)
        }
    }

    /// A string map: count, then key and value strings in strictly ascending key order.
    mutating func writeStringMap(_ map: [String: String], _ what: StaticString) throws(WireError) {
        guard map.count <= WireLimits.default.maxMetadataEntries else {
            throw WireError(
                .limitExceeded,
                "a string map has at most \(WireLimits.default.maxMetadataEntries) entries, this one has \(map.count)")
        }
        writeVarint(UInt64(map.count))
        for key in map.keys.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }) {
            guard !key.isEmpty else { throw WireError(.invalidArgument, "a string map's key is not empty") }
            try writeString(key, max: WireLimits.default.maxMetadataKeyBytes, "a string map key")
            try writeString(map[key] ?? "", max: WireLimits.default.maxTextBytes, what)
        }
    }
}

extension PayloadReader {
    /// The fields ``ByteBuffer/writeIdentityChange(_:)`` writes.
    mutating func readIdentityChange(_ limits: WireLimits) throws(WireError) -> IdentityChange {
        let user = try readUserID(limits)
        guard try readPresence("the identity") else { return IdentityChange(user: user, identity: nil) }
        let values = try readStringMap(limits, "an identity value")
        let metadata = try readStringMap(limits, "an identity metadata value")
        return IdentityChange(user: user, identity: .init(values: values, metadata: metadata))
    }

    mutating func readStringMap(_ limits: WireLimits, _ what: StaticString) throws(WireError) -> [String: String] {
        let count = try readCount(max: limits.maxMetadataEntries, minElementSize: 2, "a string map's entry count")
        var map = [String: String](minimumCapacity: count)
        var previous: [UInt8]?
        for _ in 0..<count {
            let key = try readString(max: limits.maxMetadataKeyBytes, "a string map key")
            let bytes = Array(key.utf8)
            guard !bytes.isEmpty else { throw WireError(.malformed, "a string map's key is empty") }
            // Canonical: keys in strictly ascending byte order, so each map has one encoding.
            if let previous, !previous.lexicographicallyPrecedes(bytes) {
                throw WireError(.nonCanonical, "string map keys must be in strictly ascending order")
            }
            map[key] = try readString(max: limits.maxTextBytes, what)
            previous = bytes
        }
        return map
    }
}
