import Foundation
import LaminaModel
import NIOCore

// Session frames (SPEC §5): version negotiation, authentication, resumption, liveness,
// acknowledgements and errors.

/// Feature bits negotiated in HELLO/WELCOME and PEER_HELLO (SPEC §5.1). Unknown bits are
/// carried as they are; the accepted set is the intersection of both sides' sets.
public struct FeatureSet: OptionSet, Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The node may send CHANGE_BATCH frames.
    public static let changeBatches = FeatureSet(rawValue: 1 << 0)
    /// Typing indicators are relayed.
    public static let typingIndicators = FeatureSet(rawValue: 1 << 1)
    /// DELIVERY_RECEIPT frames are accepted.
    public static let deliveryReceipts = FeatureSet(rawValue: 1 << 2)
    /// FETCH_HISTORY frames are accepted.
    public static let historyFetch = FeatureSet(rawValue: 1 << 3)
    /// `message-parts-changed` changes (§6.4 kind 11) are sent, and UPDATE_MESSAGE_PARTS is accepted.
    public static let partUpdates = FeatureSet(rawValue: 1 << 5)
    /// FETCH_HISTORY policy 3 (`pageAfter`) is accepted: complete history a page at a time.
    public static let historyPaging = FeatureSet(rawValue: 1 << 6)
    /// `identity-changed` changes (§6.4 kind 12) are sent.
    public static let identities = FeatureSet(rawValue: 1 << 7)
    /// BLOCK_USER is accepted and `block-list-changed` changes (§6.4 kind 13) are sent.
    public static let blockLists = FeatureSet(rawValue: 1 << 8)
    /// SET_PRESENCE is accepted and `presence-changed` changes (§6.4 kind 14) are sent (§6.6).
    public static let presence = FeatureSet(rawValue: 1 << 9)
    /// FOLLOW_USER is accepted and `follow-changed` changes (§6.4 kind 15) are sent (§6.7).
    public static let following = FeatureSet(rawValue: 1 << 10)
    /// The channel commands (CREATE_CHANNEL … DELETE_CHANNEL) are accepted and channel changes
    /// (§6.4 kinds 16 to 19) are sent (§6.8).
    public static let channels = FeatureSet(rawValue: 1 << 11)
    /// A conversation's receipts byte may be 2 or 3, Layer's two switches (§3.16); without it
    /// the node sends the old single flag (``ReceiptSwitches/singleFlag``) and refuses 2 and 3.
    public static let receiptSwitches = FeatureSet(rawValue: 1 << 13)
    /// REACT is accepted and `reactions-changed` changes (§6.4 kind 20) are sent (§6.9).
    public static let reactions = FeatureSet(rawValue: 1 << 14)
    /// Replies and threads (§6.2): SEND_REPLY and FETCH_HISTORY policy 4 (a thread) are
    /// accepted, and messages that are replies or thread roots come as `thread-message`
    /// (§6.4 kind 21); without it they come as plain `message-created` (kind 6).
    public static let replies = FeatureSet(rawValue: 1 << 15)
    /// A message may carry the users it mentions (§3.17): SEND_MESSAGE with mentions is
    /// accepted, and messages are sent with theirs; without it they are sent without.
    public static let mentions = FeatureSet(rawValue: 1 << 17)
    /// SET_NOTIFICATION_LEVEL is accepted and `notification-level-changed` changes (§6.4 kind
    /// 22) are sent (§6.9).
    public static let notificationLevels = FeatureSet(rawValue: 1 << 18)
    /// SEARCH_MESSAGES is accepted: a full-text search of the user's messages on the node (§6.3).
    public static let messageSearch = FeatureSet(rawValue: 1 << 19)
    /// Peers: part edits replicate per part, as REPLICATE kind 74 (SPEC §6.2, §6.5); a peer
    /// without it gets kind 11 with the whole list. Offered in PEER_HELLO only.
    public static let perPartEdits = FeatureSet(rawValue: 1 << 20)

    /// SYNC with cursor 0 is answered with a snapshot of the user's conversations (with their
    /// latest message and counts) instead of the feed from its first entry (SPEC §6.3).
    public static let snapshots = FeatureSet(rawValue: 1 << 4)

    /// What a client offers by default: every feature but ``snapshots``, which changes what
    /// SYNC with cursor 0 returns and so is asked for by clients that fetch history by policy,
    /// and ``presence``, which makes the node send presence changes unasked (outside the feed)
    /// and so is asked for by clients that show presence.
    public static let all: FeatureSet = [
        .changeBatches, .typingIndicators, .deliveryReceipts, .historyFetch, .partUpdates, .historyPaging, .identities,
        .blockLists, .following, .channels, .receiptSwitches, .reactions, .replies, .mentions, .notificationLevels,
        .messageSearch,
    ]
    /// What this implementation supports (what a node grants): ``all``, ``snapshots`` and ``presence``.
    public static let supported: FeatureSet = [.all, .snapshots, .presence]
}

/// HELLO (0x0001), client -> node, first frame of a session.
/// ```
/// +-------------------+-------------------+----------------+-----------------+
/// | min version (u16) | max version (u16) | features (u64) | agent (string)  |
/// +-------------------+-------------------+----------------+-----------------+
/// ```
public struct Hello: Hashable, Sendable {
    /// The oldest and newest protocol versions the client speaks; 1 <= min <= max.
    public var minVersion: UInt16
    public var maxVersion: UInt16
    public var features: FeatureSet
    /// The client's name and version, for logs (at most 1,024 bytes).
    public var agent: String

    public init(
        minVersion: UInt16 = WireProtocol.version, maxVersion: UInt16 = WireProtocol.version,
        features: FeatureSet = .all, agent: String
    ) {
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.features = features
        self.agent = agent
    }
}

/// WELCOME (0x0002), node -> client: the chosen version and features, and which node of
/// which cluster answers.
/// ```
/// +---------------+----------------+--------------+----------------------+----------------------+-------------------+
/// | version (u16) | features (u64) | node (u64)   | server time (svarint)| max frame size (u32) | cluster (string)  |
/// +---------------+----------------+--------------+----------------------+----------------------+-------------------+
/// ```
public struct Welcome: Hashable, Sendable {
    public var version: UInt16
    public var features: FeatureSet
    public var nodeID: NodeID
    public var serverTime: Timestamp
    /// The largest payload the node accepts (at most 4 MiB).
    public var maxFrameSize: UInt32
    /// The cluster the node belongs to (SPEC §6.5; a node alone names its configured one).
    public var cluster: String

    public init(
        version: UInt16, features: FeatureSet, nodeID: NodeID, serverTime: Timestamp, maxFrameSize: UInt32,
        cluster: String = "lamina"
    ) {
        self.version = version
        self.features = features
        self.nodeID = nodeID
        self.serverTime = serverTime
        self.maxFrameSize = maxFrameSize
        self.cluster = cluster
    }
}

/// NONCE_REQUEST (0x0003), client -> node.
/// ```
/// +------------------+
/// | request id (16)  |
/// +------------------+
/// ```
public struct NonceRequest: Hashable, Sendable {
    public var requestID: UUID
    public init(requestID: UUID) { self.requestID = requestID }
}

/// NONCE (0x0004), node -> client: a nonce for the identity token; also sent unasked after
/// an `authentication-required` or session error.
/// ```
/// +-----------------+----------------+----------------------+
/// | request id (16) | nonce (string) | expires at (svarint) |
/// +-----------------+----------------+----------------------+
/// ```
public struct Nonce: Hashable, Sendable {
    /// The NONCE_REQUEST's id; the nil UUID when unasked.
    public var requestID: UUID
    public var nonce: String
    public var expiresAt: Timestamp

    public init(requestID: UUID, nonce: String, expiresAt: Timestamp) {
        self.requestID = requestID
        self.nonce = nonce
        self.expiresAt = expiresAt
    }
}

/// AUTHENTICATE (0x0005), client -> node: an identity token signed by the app's backend.
/// ```
/// +-----------------+-------------------------+----------------+
/// | request id (16) | identity token (string) | device id (16) |
/// +-----------------+-------------------------+----------------+
/// ```
public struct Authenticate: Hashable, Sendable {
    public var requestID: UUID
    /// A JWT (compact serialization), at most 8,192 bytes.
    public var identityToken: String
    /// The device's stable id: the node keeps one sync cursor per device.
    public var deviceID: UUID

    public init(requestID: UUID, identityToken: String, deviceID: UUID) {
        self.requestID = requestID
        self.identityToken = identityToken
        self.deviceID = deviceID
    }
}

/// AUTHENTICATED (0x0006), node -> client: answers AUTHENTICATE or RESUME_SESSION.
/// ```
/// +-----------------+------------------------+--------+---------------------+--------------------+----------------------+
/// | request id (16) | session token (string) | user   | display name (opt)  | avatar URL (opt)   | expires at (svarint) |
/// +-----------------+------------------------+--------+---------------------+--------------------+----------------------+
/// ```
public struct Authenticated: Hashable, Sendable {
    public var requestID: UUID
    public var sessionToken: String
    public var identity: Identity
    public var expiresAt: Timestamp

    public init(requestID: UUID, sessionToken: String, identity: Identity, expiresAt: Timestamp) {
        self.requestID = requestID
        self.sessionToken = sessionToken
        self.identity = identity
        self.expiresAt = expiresAt
    }
}

/// RESUME_SESSION (0x0007), client -> node: authenticate with an earlier session token.
/// ```
/// +-----------------+------------------------+----------------+
/// | request id (16) | session token (string) | device id (16) |
/// +-----------------+------------------------+----------------+
/// ```
public struct ResumeSession: Hashable, Sendable {
    public var requestID: UUID
    public var sessionToken: String
    public var deviceID: UUID

    public init(requestID: UUID, sessionToken: String, deviceID: UUID) {
        self.requestID = requestID
        self.sessionToken = sessionToken
        self.deviceID = deviceID
    }
}

/// END_SESSION (0x000C), client -> node: revoke the session this stream authenticated with
/// (signing out). Answered by ACK once the revocation is durable; then the node ends the
/// stream, and every other stream of the session with a fatal `session-revoked` (SPEC §5.8).
/// ```
/// +------------------+
/// | request id (16)  |
/// +------------------+
/// ```
public struct EndSession: Hashable, Sendable {
    public var requestID: UUID
    public init(requestID: UUID) { self.requestID = requestID }
}

/// PING (0x0008) / PONG (0x0009), either direction: an opaque value echoed back.
/// ```
/// +----------------+
/// | payload (u64)  |
/// +----------------+
/// ```
public struct Ping: Hashable, Sendable {
    public var payload: UInt64
    public init(payload: UInt64) { self.payload = payload }
}

/// ACK (0x000A), node -> client or peer: the command with this id is durable (SPEC §7).
/// ```
/// +-----------------+--------------------+-----------------+------------------+--------------------+
/// | request id (16) | conversation (opt) | position (opt)  | timestamp (opt)  | cursor (opt varint)|
/// +-----------------+--------------------+-----------------+------------------+--------------------+
/// ```
public struct Ack: Hashable, Sendable {
    /// The command's client-chosen id (object id or request id).
    public var requestID: UUID
    /// The conversation the command resolved to (e.g. an existing distinct one).
    public var conversationID: ConversationID?
    /// A sent message's position.
    public var position: MessagePosition?
    /// When the node accepted the command (a message's sent-at).
    public var timestamp: Timestamp?
    /// For SYNC: the feed position the backlog was sent up to.
    public var cursor: UInt64?

    public init(
        requestID: UUID, conversationID: ConversationID? = nil, position: MessagePosition? = nil,
        timestamp: Timestamp? = nil, cursor: UInt64? = nil
    ) {
        self.requestID = requestID
        self.conversationID = conversationID
        self.position = position
        self.timestamp = timestamp
        self.cursor = cursor
    }
}

/// ERROR (0x000B), either direction (SPEC §8, §9).
/// ```
/// +-------------------+------------+-----------------+--------------+--------------------------+--------------------+
/// | request id (opt)  | code (u16) | reason (string) | fatal (bool) | retry after ms (opt u32) | conversation (opt) |
/// +-------------------+------------+-----------------+--------------+--------------------------+--------------------+
/// ```
public struct ErrorFrame: Hashable, Sendable {
    /// The failed command's id, if the error is about one.
    public var requestID: UUID?
    public var code: WireError.Code
    /// Human-readable, at most 1,024 bytes.
    public var reason: String
    /// The sender closes the stream after this frame.
    public var isFatal: Bool
    /// For `overloaded` and `quota-exceeded`: when to retry.
    public var retryAfterMilliseconds: UInt32?
    /// For `existing-distinct-conversation`: the existing conversation.
    public var conversationID: ConversationID?

    public init(
        requestID: UUID? = nil, code: WireError.Code, reason: String, isFatal: Bool,
        retryAfterMilliseconds: UInt32? = nil, conversationID: ConversationID? = nil
    ) {
        self.requestID = requestID
        self.code = code
        self.reason = reason
        self.isFatal = isFatal
        self.retryAfterMilliseconds = retryAfterMilliseconds
        self.conversationID = conversationID
    }

    /// The ERROR frame for a failure; fatal when its code closes the stream.
    public init(_ error: WireError, requestID: UUID? = nil) {
        var reason = error.reason
        if reason.utf8.count > WireLimits.default.maxTextBytes {
            reason = String(decoding: reason.utf8.prefix(WireLimits.default.maxTextBytes - 3), as: UTF8.self) + "..."
            while reason.utf8.count > WireLimits.default.maxTextBytes { reason.removeLast() }
        }
        self.init(requestID: requestID, code: error.code, reason: reason, isFatal: error.code.closesStream)
    }
}

// MARK: - Codec

extension Hello {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        guard minVersion >= 1, minVersion <= maxVersion else {
            throw WireError(.invalidArgument, "version range \(minVersion)...\(maxVersion) is empty or starts at 0")
        }
        b.writeInteger(minVersion, as: UInt16.self)
        b.writeInteger(maxVersion, as: UInt16.self)
        b.writeInteger(features.rawValue, as: UInt64.self)
        try b.writeString(agent, max: WireLimits.default.maxTextBytes, "the agent")
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Hello {
        let minVersion = try b.readU16("the minimum version")
        let maxVersion = try b.readU16("the maximum version")
        // SPEC §5.1: "1 <= min version <= max version."
        guard minVersion >= 1, minVersion <= maxVersion else {
            throw WireError(.malformed, "version range \(minVersion)...\(maxVersion) is empty or starts at 0")
        }
        let features = FeatureSet(rawValue: try b.readU64("the features"))
        let agent = try b.readString(max: limits.maxTextBytes, "the agent")
        return Hello(minVersion: minVersion, maxVersion: maxVersion, features: features, agent: agent)
    }
}

extension Welcome {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeInteger(version, as: UInt16.self)
        b.writeInteger(features.rawValue, as: UInt64.self)
        b.writeInteger(nodeID.rawValue, as: UInt64.self)
        b.writeTimestamp(serverTime)
        b.writeInteger(maxFrameSize, as: UInt32.self)
        try b.writeString(cluster, max: WireLimits.default.maxTextBytes, "the cluster name")
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Welcome {
        let version = try b.readU16("the version")
        let features = FeatureSet(rawValue: try b.readU64("the features"))
        let node = NodeID(try b.readU64("the node id"))
        let time = try b.readTimestamp("the server time")
        let maxFrame = try b.readU32("the maximum frame size")
        let cluster = try b.readString(max: limits.maxTextBytes, "the cluster name")
        return Welcome(
            version: version, features: features, nodeID: node, serverTime: time, maxFrameSize: maxFrame,
            cluster: cluster)
    }
}

extension NonceRequest {
    func encode(into b: inout ByteBuffer) { b.writeUUID(requestID) }
    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> NonceRequest {
        NonceRequest(requestID: try b.readUUID("the request id"))
    }
}

extension EndSession {
    func encode(into b: inout ByteBuffer) { b.writeUUID(requestID) }
    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> EndSession {
        EndSession(requestID: try b.readUUID("the request id"))
    }
}

extension Nonce {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeString(nonce, max: WireLimits.default.maxTokenBytes, "the nonce")
        b.writeTimestamp(expiresAt)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Nonce {
        let id = try b.readUUID("the request id")
        let nonce = try b.readString(max: limits.maxTokenBytes, "the nonce")
        let expires = try b.readTimestamp("the expiry")
        return Nonce(requestID: id, nonce: nonce, expiresAt: expires)
    }
}

extension Authenticate {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeString(identityToken, max: WireLimits.default.maxTokenBytes, "the identity token")
        b.writeUUID(deviceID)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Authenticate {
        let id = try b.readUUID("the request id")
        let token = try b.readString(max: limits.maxTokenBytes, "the identity token")
        let device = try b.readUUID("the device id")
        return Authenticate(requestID: id, identityToken: token, deviceID: device)
    }
}

extension Authenticated {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeString(sessionToken, max: WireLimits.default.maxTokenBytes, "the session token")
        try b.writeUserID(identity.userID)
        try b.writeOptionalText(identity.displayName, "the display name")
        try b.writeOptionalText(identity.avatarURL, "the avatar URL")
        b.writeTimestamp(expiresAt)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Authenticated {
        let id = try b.readUUID("the request id")
        let token = try b.readString(max: limits.maxTokenBytes, "the session token")
        let user = try b.readUserID(limits)
        let name = try b.readOptionalText(limits, "the display name")
        let avatar = try b.readOptionalText(limits, "the avatar URL")
        let expires = try b.readTimestamp("the expiry")
        return Authenticated(
            requestID: id, sessionToken: token, identity: Identity(userID: user, displayName: name, avatarURL: avatar),
            expiresAt: expires)
    }
}

extension ResumeSession {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        b.writeUUID(requestID)
        try b.writeString(sessionToken, max: WireLimits.default.maxTokenBytes, "the session token")
        b.writeUUID(deviceID)
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ResumeSession {
        let id = try b.readUUID("the request id")
        let token = try b.readString(max: limits.maxTokenBytes, "the session token")
        let device = try b.readUUID("the device id")
        return ResumeSession(requestID: id, sessionToken: token, deviceID: device)
    }
}

extension Ping {
    func encode(into b: inout ByteBuffer) { b.writeInteger(payload, as: UInt64.self) }
    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Ping {
        Ping(payload: try b.readU64("the ping payload"))
    }
}

extension Ack {
    func encode(into b: inout ByteBuffer) {
        b.writeUUID(requestID)
        if let conversationID {
            b.writeInteger(1, as: UInt8.self)
            b.writeID(conversationID)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
        if let position {
            b.writeInteger(1, as: UInt8.self)
            b.writeHLC(position)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
        if let timestamp {
            b.writeInteger(1, as: UInt8.self)
            b.writeTimestamp(timestamp)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
        if let cursor {
            b.writeInteger(1, as: UInt8.self)
            b.writeVarint(cursor)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> Ack {
        let id = try b.readUUID("the request id")
        let conversation =
            try b.readPresence("the conversation") ? try b.readID(ConversationID.self, "the conversation") : nil
        let position = try b.readPresence("the position") ? try b.readHLC("the position") : nil
        let timestamp = try b.readPresence("the timestamp") ? try b.readTimestamp("the timestamp") : nil
        let cursor = try b.readPresence("the cursor") ? try b.readVarint("the cursor") : nil
        return Ack(
            requestID: id, conversationID: conversation, position: position, timestamp: timestamp, cursor: cursor)
    }
}

extension ErrorFrame {
    func encode(into b: inout ByteBuffer) throws(WireError) {
        if let requestID {
            b.writeInteger(1, as: UInt8.self)
            b.writeUUID(requestID)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
        b.writeInteger(code.wireValue, as: UInt16.self)
        try b.writeString(reason, max: WireLimits.default.maxTextBytes, "the reason")
        b.writeBool(isFatal)
        if let retryAfterMilliseconds {
            b.writeInteger(1, as: UInt8.self)
            b.writeInteger(retryAfterMilliseconds, as: UInt32.self)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
        if let conversationID {
            b.writeInteger(1, as: UInt8.self)
            b.writeID(conversationID)
        } else {
            b.writeInteger(0, as: UInt8.self)
        }
    }

    static func decode(from b: inout PayloadReader, _ limits: WireLimits) throws(WireError) -> ErrorFrame {
        let id = try b.readPresence("the request id") ? try b.readUUID("the request id") : nil
        let code = WireError.Code(wireValue: try b.readU16("the error code"))
        let reason = try b.readString(max: limits.maxTextBytes, "the reason")
        let fatal = try b.readBool("the fatal flag")
        let retry = try b.readPresence("the retry delay") ? try b.readU32("the retry delay") : nil
        let conversation =
            try b.readPresence("the conversation") ? try b.readID(ConversationID.self, "the conversation") : nil
        return ErrorFrame(
            requestID: id, code: code, reason: reason, isFatal: fatal, retryAfterMilliseconds: retry,
            conversationID: conversation)
    }
}

extension ByteBuffer {
    mutating func writeOptionalText(_ s: String?, _ what: StaticString) throws(WireError) {
        if let s {
            writeInteger(1, as: UInt8.self)
            try writeString(s, max: WireLimits.default.maxTextBytes, what)
        } else {
            writeInteger(0, as: UInt8.self)
        }
    }
}

extension PayloadReader {
    mutating func readOptionalText(_ limits: WireLimits, _ what: StaticString) throws(WireError) -> String? {
        try readPresence(what) ? try readString(max: limits.maxTextBytes, what) : nil
    }
}
