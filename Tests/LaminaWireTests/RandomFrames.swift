import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

/// Generates random valid frames of every type from a seeded PRNG (reproducible).
struct RandomFrames {
    var rng: SplitMix64
    /// When set, sizes and counts sometimes go past the spec's limits (the values stay
    /// constructible): for checking that the encoder refuses what the decoder would.
    var wild: Bool

    init(seed: UInt64, wild: Bool = false) {
        rng = SplitMix64(seed: seed)
        self.wild = wild
    }

    /// `limit`, or sometimes a little more when wild.
    mutating func cap(_ limit: Int) -> Int { wild && int(0...3) == 0 ? limit + int(1...max(1, limit / 4 + 2)) : limit }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func bool() -> Bool { Bool.random(using: &rng) }
    mutating func u64() -> UInt64 {
        // Mix small and large values so every varint length occurs.
        switch int(0...3) {
        case 0: UInt64(int(0...127))
        case 1: UInt64(int(0...100_000))
        case 2: rng.next() >> UInt64(int(0...63))
        default: rng.next()
        }
    }
    mutating func u32() -> UInt32 { UInt32(truncatingIfNeeded: u64()) }
    mutating func uuid() -> UUID {
        let a = rng.next()
        let b = rng.next()
        return UUID(
            uuid: (
                UInt8(truncatingIfNeeded: a), UInt8(truncatingIfNeeded: a >> 8), UInt8(truncatingIfNeeded: a >> 16),
                UInt8(truncatingIfNeeded: a >> 24),
                UInt8(truncatingIfNeeded: a >> 32), UInt8(truncatingIfNeeded: a >> 40),
                UInt8(truncatingIfNeeded: a >> 48), UInt8(truncatingIfNeeded: a >> 56),
                UInt8(truncatingIfNeeded: b), UInt8(truncatingIfNeeded: b >> 8), UInt8(truncatingIfNeeded: b >> 16),
                UInt8(truncatingIfNeeded: b >> 24),
                UInt8(truncatingIfNeeded: b >> 32), UInt8(truncatingIfNeeded: b >> 40),
                UInt8(truncatingIfNeeded: b >> 48), UInt8(truncatingIfNeeded: b >> 56)
            ))
    }
    mutating func optional<T>(_ make: (inout RandomFrames) -> T) -> T? { bool() ? make(&self) : nil }

    static let alphabet: [Character] = Array("abcxyzABZ019-_@ äöüßé漢字😀")
    mutating func string(_ maxLength: Int, alphabet: [Character] = RandomFrames.alphabet) -> String {
        var s = ""
        let maxLength = cap(maxLength)
        let n = int(0...maxLength)
        for _ in 0..<n {
            s.append(alphabet[int(0...(alphabet.count - 1))])
        }
        while s.utf8.count > maxLength { s.removeLast() }
        return s
    }
    mutating func user() -> UserID {
        var s = string(12)
        if s.isEmpty { s = "u" }
        return try! UserID(s)
    }
    mutating func users(_ max: Int) -> Set<UserID> {
        if wild && int(0...20) == 0 { return Set((0..<int(240...260)).map { UserID(stringLiteral: "user-\($0)") }) }
        return Set((0..<int(0...max)).map { _ in user() })
    }
    mutating func timestamp() -> Timestamp { Timestamp(millisecondsSince1970: Int64(bitPattern: u64())) }
    mutating func hlc() -> HLCTimestamp { HLCTimestamp(physical: u64(), logical: u32(), node: NodeID(u64())) }
    mutating func mime() -> MIMEType {
        let all: [MIMEType] = [
            "text/plain", "image/png", "application/json", "application/vnd.lamina.location+json", "video/mp4",
        ]
        return all[int(0...(all.count - 1))]
    }
    mutating func part() -> MessagePart {
        if int(0...4) == 0 {
            let ref = ContentReference(
                id: ContentID(uuid: uuid()), size: UInt64(int(0...Int(Limits.maxPartBytes))),
                sha256: (0..<32).map { _ in UInt8(int(0...255)) })
            return MessagePart(id: uuid(), mimeType: mime(), content: .external(ref))
        }
        let n = int(0...3) == 0 ? int(0...cap(2_048)) : int(0...120)
        return MessagePart(id: uuid(), mimeType: mime(), content: .inline((0..<n).map { _ in UInt8(int(0...255)) }))
    }
    mutating func parts() -> [MessagePart] {
        if wild && int(0...30) == 0 {
            return int(0...1) == 0
                ? []
                : (0..<int(995...1_005)).map { _ in MessagePart(id: uuid(), mimeType: .textPlain, content: .inline([]))
                }
        }
        return (0..<(int(0...9) == 0 ? int(1...40) : int(1...3))).map { _ in part() }
    }
    mutating func push() -> PushConfiguration {
        var data: [String: String] = [:]
        for _ in 0..<int(0...4) { data[string(10)] = string(20) }
        return PushConfiguration(
            alert: optional { $0.string(40) }, sound: optional { $0.string(10) }, title: optional { $0.string(10) },
            category: optional { $0.string(10) }, data: data)
    }
    mutating func key() -> String {
        var k = string(8, alphabet: Array("abcdefgh_-üé1"))
        if k.isEmpty && !(wild && int(0...5) == 0) { k = "k" }
        if wild && int(0...20) == 0 { k += "." }
        return k
    }
    mutating func metadataMap(level: Int) -> [String: MetadataValue] {
        var map: [String: MetadataValue] = [:]
        for _ in 0..<int(0...(level == 1 ? 4 : 2)) { map[key()] = metadataValue(level: level) }
        return map
    }
    mutating func metadataValue(level: Int) -> MetadataValue {
        level < (wild ? Limits.maxMetadataDepth + 2 : Limits.maxMetadataDepth) && int(0...2) == 0
            ? .dictionary(metadataMap(level: level + 1)) : .string(string(30))
    }
    mutating func keyPath() -> MetadataKeyPath {
        while true {
            if let path = try? MetadataKeyPath((0..<int(1...Limits.maxMetadataDepth)).map { _ in key() }) {
                return path
            }
        }
    }
    mutating func mode() -> DeletionMode { bool() ? .myDevices : .allParticipants }
    mutating func typingState() -> TypingState { TypingState.allCases[int(0...2)] }
    mutating func status() -> RecipientStatus { RecipientStatus.allCases[int(0...4)] }
    mutating func conversation() -> Conversation {
        Conversation(
            id: ConversationID(uuid: uuid()), participants: users(6), isDistinct: bool(),
            metadata: Metadata(metadataMap(level: 1)), deliveryReceiptsEnabled: bool(), readReceiptsEnabled: bool(),
            createdAt: timestamp(),
            creator: user())
    }
    mutating func message() -> Message {
        var statuses: [UserID: RecipientStatus] = [:]
        for _ in 0..<int(0...4) { statuses[user()] = status() }
        var m = Message(
            id: MessageID(uuid: uuid()), conversationID: ConversationID(uuid: uuid()), sender: user(), parts: parts(),
            sentAt: optional { $0.timestamp() }, position: optional { $0.hlc() }, push: optional { $0.push() },
            recipientStatus: statuses, mentions: users(3))
        // Kind 21 (SPEC §6.4): a reply, or a root with replies, now and then.
        switch int(0...5) {
        case 0: m.replyTo = MessageID(uuid: uuid())
        case 1:
            m.thread = MessageThread(
                replyCount: max(1, u64()), lastReply: MessageID(uuid: uuid()), lastReplyAt: hlc())
        default: break
        }
        return m
    }

    /// A notification level and an optional end (SPEC §6.10).
    mutating func level() -> (NotificationLevel, Timestamp?) {
        (NotificationLevel.allCases[int(0...2)], optional { $0.timestamp() })
    }
    /// A conversation change mostly, sometimes a change of a user's state (SPEC §6.5).
    mutating func replicatedEvent() -> ReplicatedEvent {
        switch int(0...9) {
        case 9:
            var c = conversation()
            c.isDistinct = true
            return .distinctCreation(DistinctCreation(conversation: c, seen: vector()))
        case 0:
            let identity = int(0...2) == 0 ? nil : IdentityChange.Identity(values: stringMap(), metadata: stringMap())
            return .user(.identity(IdentityChange(user: user(), identity: identity)))
        case 1: return .user(.block(BlockChange(blocker: user(), blocked: user(), blocking: int(0...1) == 1)))
        case 2: return .user(.badge(BadgeChange(user: user(), externalUnreadCount: u64())))
        case 3: return .user(.sessionsRevoked(user()))
        case 4:
            return .user(.pushRegistration(PushRegistrationChange(user: user(), device: uuid(), node: NodeID(u64()))))
        case 5: return .user(.follow(FollowChange(follower: user(), followed: user(), following: int(0...1) == 1)))
        case 6:
            let (level, until) = level()
            return .user(
                .notificationLevel(
                    NotificationLevelChange(
                        user: user(), conversationID: ConversationID(uuid: uuid()), level: level, until: until)))
        case 7:
            // Kind 74 (SPEC §6.5): a per-part edit, some of its parts set, some other ids removed.
            let parts = parts()
            return .partsEdited(
                MessagePartsEdited(
                    conversationID: ConversationID(uuid: uuid()), messageID: MessageID(uuid: uuid()), parts: parts,
                    set: Set(parts.filter { _ in int(0...1) == 1 }.map(\.id)),
                    removed: Set((0..<int(0...3)).map { _ in uuid() }), by: user(), at: hlc()))
        default: return .change(event())
        }
    }

    mutating func stringMap() -> [String: String] {
        var map: [String: String] = [:]
        for _ in 0..<int(0...4) {
            let key = string(12)
            map[key.isEmpty ? "k" : key] = string(40)
        }
        return map
    }

    mutating func event() -> ChangeEvent {
        let c = ConversationID(uuid: uuid())
        switch int(0...21) {
        case 0: return .conversationCreated(conversation())
        case 1:
            return .conversationUpdated(
                ConversationUpdated(
                    conversationID: c, isDistinct: bool(), deliveryReceiptsEnabled: bool(), readReceiptsEnabled: bool(),
                    messageCount: u64(),
                    unreadCount: u64(), lastMessageID: optional { MessageID(uuid: $0.uuid()) }))
        case 2:
            return .participantsChanged(
                ParticipantsChanged(conversationID: c, added: users(4), removed: users(4), by: user(), at: hlc()))
        case 3:
            let path = keyPath()
            var value: MetadataValue? = optional { $0.metadataValue(level: path.components.count) }
            if path.components.count == Limits.maxMetadataDepth, case .dictionary? = value { value = .string("leaf") }
            return .metadataChanged(
                MetadataChanged(conversationID: c, keyPath: path, value: value, by: user(), at: hlc()))
        case 4:
            return .conversationDeleted(
                ConversationDeleted(conversationID: c, mode: mode(), below: optional { $0.hlc() }, by: user()))
        case 5: return .identifierChanged(IdentifierChanged(from: c, to: ConversationID(uuid: uuid())))
        case 6: return .messageCreated(message())
        case 7:
            return .messageStatusChanged(
                MessageStatusChanged(
                    conversationID: c, messageID: MessageID(uuid: uuid()), user: user(), status: status()))
        case 8:
            return .messageDeleted(
                MessageDeleted(conversationID: c, messageID: MessageID(uuid: uuid()), mode: mode(), by: user()))
        case 9: return .statusUpTo(StatusUpTo(conversationID: c, user: user(), status: status(), upTo: hlc()))
        case 10:
            return .messagePartsChanged(
                MessagePartsChanged(
                    conversationID: c, messageID: MessageID(uuid: uuid()), parts: parts(), by: user(), at: hlc()))
        case 11:
            return .identityChanged(
                IdentityChange(
                    user: user(),
                    identity: bool() ? nil : IdentityChange.Identity(values: stringMap(), metadata: stringMap())))
        case 12: return .blockListChanged(BlockListChanged(user: user(), blocking: bool()))
        case 14: return .followChanged(FollowChanged(user: user(), following: bool()))
        case 15: return .channelCreated(channel())
        case 16:
            return .channelMembershipChanged(
                ChannelMembershipChanged(
                    channelID: ChannelID(uuid: uuid()), user: user(), joined: bool(), by: user(), at: hlc()))
        case 17:
            return .channelMessage(
                ChannelMessage(
                    id: MessageID(uuid: uuid()), channelID: ChannelID(uuid: uuid()), sender: user(),
                    sentAt: timestamp(), position: hlc(), logSeq: u64(), parts: parts()))
        case 18: return .channelDeleted(ChannelDeleted(channelID: ChannelID(uuid: uuid()), by: user(), at: hlc()))
        case 20:
            let present = bool()
            return .reactionsChanged(
                ReactionsChanged(
                    conversationID: c, messageID: MessageID(uuid: uuid()), user: user(), key: reactionKey(),
                    present: present, at: hlc(), removedTags: present ? [] : (0..<int(1...4)).map { _ in hlc() }))
        case 21:
            let (level, until) = level()
            return .notificationLevelChanged(NotificationLevelChanged(conversationID: c, level: level, until: until))
        case 13:
            return .presenceChanged(
                PresenceChanged(
                    user: user(),
                    presence: Presence(
                        status: PresenceStatus.allCases[int(0...4)], lastSeenAt: optional { $0.timestamp() })))
        default: return .typing(TypingChanged(conversationID: c, user: user(), state: typingState()))
        }
    }
    mutating func reactionKey() -> String {
        let raw = string(ReactionKey.maxBytes)
        return raw.isEmpty || raw.utf8.count > ReactionKey.maxBytes ? "+1" : raw
    }
    mutating func channelName() -> ChannelName {
        let raw = string(40)
        return (try? ChannelName(raw)) ?? (try! ChannelName("c"))
    }

    mutating func channel() -> ChatChannel {
        ChatChannel(id: ChannelID(uuid: uuid()), name: channelName(), creator: user(), createdAt: timestamp())
    }

    mutating func vector() -> VersionVector {
        var counters: [NodeID: UInt64] = [:]
        for _ in 0..<int(0...6) { counters[NodeID(u64())] = max(1, u64()) }
        return VersionVector(counters)
    }

    /// A random valid frame of `type`.
    mutating func frame(_ type: FrameType) -> Frame {
        let c = ConversationID(uuid: uuid())
        switch type {
        case .hello:
            let lo = UInt16(int(1...5))
            return .hello(
                Hello(
                    minVersion: lo, maxVersion: lo + UInt16(int(0...3)), features: FeatureSet(rawValue: u64()),
                    agent: string(60)))
        case .welcome:
            return .welcome(
                Welcome(
                    version: UInt16(int(1...65_535)), features: FeatureSet(rawValue: u64()), nodeID: NodeID(u64()),
                    serverTime: timestamp(), maxFrameSize: u32(), cluster: string(250)))
        case .nonceRequest: return .nonceRequest(NonceRequest(requestID: uuid()))
        case .endSession: return .endSession(EndSession(requestID: uuid()))
        case .blockUser: return .blockUser(BlockUser(requestID: uuid(), user: user(), blocking: bool()))
        case .followUser: return .followUser(FollowUser(requestID: uuid(), user: user(), following: bool()))
        case .createChannel:
            return .createChannel(CreateChannel(channelID: ChannelID(uuid: uuid()), name: channelName()))
        case .joinChannel: return .joinChannel(ChannelRequest(requestID: uuid(), channelID: ChannelID(uuid: uuid())))
        case .leaveChannel: return .leaveChannel(ChannelRequest(requestID: uuid(), channelID: ChannelID(uuid: uuid())))
        case .deleteChannel:
            return .deleteChannel(ChannelRequest(requestID: uuid(), channelID: ChannelID(uuid: uuid())))
        case .sendChannelMessage:
            return .sendChannelMessage(
                SendChannelMessage(
                    messageID: MessageID(uuid: uuid()), channelID: ChannelID(uuid: uuid()), parts: parts()))
        case .fetchChannel:
            return .fetchChannel(
                FetchChannel(requestID: uuid(), channelID: ChannelID(uuid: uuid()), after: u64(), count: u32()))
        case .setPresence:
            return .setPresence(SetPresence(requestID: uuid(), status: PresenceStatus.allCases[int(0...4)]))
        case .registerPushToken:
            switch int(0...3) {
            case 0: return .registerPushToken(RegisterPushToken(requestID: uuid(), token: nil))
            case 1:
                return .registerPushToken(
                    RegisterPushToken(
                        requestID: uuid(),
                        token: .apns(
                            token: (0..<int(0...100)).map { _ in UInt8(int(0...255)) }, topic: string(60),
                            environment: bool() ? .sandbox : .production)))
            case 2: return .registerPushToken(RegisterPushToken(requestID: uuid(), token: .fcm(token: string(200))))
            default:
                return .registerPushToken(RegisterPushToken(requestID: uuid(), token: .gateway(token: string(200))))
            }
        case .nonce: return .nonce(Nonce(requestID: uuid(), nonce: string(64), expiresAt: timestamp()))
        case .authenticate:
            return .authenticate(
                Authenticate(requestID: uuid(), identityToken: string(int(0...1) == 0 ? 8_000 : 300), deviceID: uuid()))
        case .authenticated:
            return .authenticated(
                Authenticated(
                    requestID: uuid(), sessionToken: string(100),
                    identity: Identity(
                        userID: user(), displayName: optional { $0.string(40) }, avatarURL: optional { $0.string(80) }),
                    expiresAt: timestamp()))
        case .resumeSession:
            return .resumeSession(ResumeSession(requestID: uuid(), sessionToken: string(100), deviceID: uuid()))
        case .ping: return .ping(Ping(payload: u64()))
        case .pong: return .pong(Ping(payload: u64()))
        case .ack:
            return .ack(
                Ack(
                    requestID: uuid(), conversationID: optional { _ in c }, position: optional { $0.hlc() },
                    timestamp: optional { $0.timestamp() }, cursor: optional { $0.u64() }))
        case .error:
            let code = WireError.Code.all[int(0...(WireError.Code.all.count - 1))]
            return .error(
                ErrorFrame(
                    requestID: optional { $0.uuid() },
                    code: bool() ? code : WireError.Code(wireValue: UInt16(int(0...65_535))), reason: string(200),
                    isFatal: bool(), retryAfterMilliseconds: optional { $0.u32() }, conversationID: optional { _ in c })
            )
        case .createConversation:
            return .createConversation(
                CreateConversation(
                    conversationID: c, participants: users(8),
                    options: ConversationOptions(
                        isDistinct: bool(), metadata: Metadata(metadataMap(level: 1)), deliveryReceiptsEnabled: bool(),
                        readReceiptsEnabled: bool()))
            )
        case .addParticipants:
            return .addParticipants(ParticipantsUpdate(requestID: uuid(), conversationID: c, users: users(8)))
        case .removeParticipants:
            return .removeParticipants(ParticipantsUpdate(requestID: uuid(), conversationID: c, users: users(8)))
        case .setMetadata:
            let path = keyPath()
            let value =
                path.components.count < Limits.maxMetadataDepth
                ? metadataValue(level: path.components.count) : .string(string(10))
            return .setMetadata(SetMetadata(requestID: uuid(), conversationID: c, keyPath: path, value: value))
        case .deleteMetadata:
            return .deleteMetadata(DeleteMetadata(requestID: uuid(), conversationID: c, keyPath: keyPath()))
        case .deleteConversation:
            return .deleteConversation(
                DeleteConversation(requestID: uuid(), conversationID: c, mode: mode(), below: optional { $0.hlc() }))
        case .markAllRead: return .markAllRead(MarkAllRead(requestID: uuid(), conversationID: c, upTo: hlc()))
        case .typing: return .typing(Typing(conversationID: c, state: typingState()))
        case .setNotificationLevel:
            let (level, until) = level()
            return .setNotificationLevel(
                SetNotificationLevel(requestID: uuid(), conversationID: c, level: level, until: until))
        case .sendMessage:
            return .sendMessage(
                SendMessage(
                    messageID: MessageID(uuid: uuid()), conversationID: c, parts: parts(), push: optional { $0.push() },
                    mentions: users(3))
            )
        case .sendReply:
            return .sendMessage(
                SendMessage(
                    messageID: MessageID(uuid: uuid()), conversationID: c, parts: parts(), push: optional { $0.push() },
                    replyTo: MessageID(uuid: uuid())))
        case .markRead:
            return .markRead(MarkRead(requestID: uuid(), conversationID: c, messageID: MessageID(uuid: uuid())))
        case .deleteMessage:
            return .deleteMessage(
                DeleteMessage(requestID: uuid(), conversationID: c, messageID: MessageID(uuid: uuid()), mode: mode()))
        case .deliveryReceipt:
            return .deliveryReceipt(DeliveryReceipt(requestID: uuid(), conversationID: c, upTo: hlc()))
        case .updateMessageParts:
            return .updateMessageParts(
                UpdateMessageParts(
                    requestID: uuid(), conversationID: c, messageID: MessageID(uuid: uuid()), parts: parts()))
        case .react:
            return .react(
                React(
                    requestID: uuid(), conversationID: c, messageID: MessageID(uuid: uuid()), key: reactionKey(),
                    op: bool() ? .add : .remove))
        case .sync: return .sync(SyncRequest(requestID: uuid(), cursor: u64()))
        case .fetchHistory:
            let thread = HistoryPolicy.thread(
                root: MessageID(uuid: uuid()), after: optional { $0.hlc() }, count: UInt32(int(1...10_000)))
            let policy: HistoryPolicy = [.complete, .unreadOnly, .lastN(max(1, u32())), thread][int(0...3)]
            return .fetchHistory(
                FetchHistory(requestID: uuid(), conversationID: c, policy: policy, before: optional { $0.hlc() }))
        case .searchMessages:
            // Any page: the node, not the codec, refuses one outside MessageSearchTerms' limits.
            return .searchMessages(
                SearchMessages(
                    requestID: uuid(), text: String(repeating: "w ", count: int(1...100)),
                    conversationID: optional { ConversationID(uuid: $0.uuid()) }, limit: u32(), offset: u32()))
        case .change: return .change(Change(seq: u64(), event: event()))
        case .changeBatch:
            return .changeBatch(ChangeBatch(changes: (0..<int(1...12)).map { _ in Change(seq: u64(), event: event()) }))
        case .peerHello:
            let lo = UInt16(int(1...5))
            return .peerHello(
                PeerHello(
                    nodeID: NodeID(u64()), minVersion: lo, maxVersion: lo + UInt16(int(0...3)),
                    features: FeatureSet(rawValue: u64()), cluster: string(30)))
        case .versionVector: return .versionVector(vector())
        case .replicate:
            return .replicate(
                Replicate(
                    operations: (0..<int(1...6)).map { _ in
                        ReplicatedOperation(
                            origin: NodeID(u64()), counter: u64(), hlc: hlc(), payload: replicatedEvent())
                    }))
        case .peerAck: return .peerAck(PeerAck(vector: vector()))
        case .peerPresence: return .peerPresence(PeerPresence(entries: presenceReports()))
        case .peerPresenceRelayed:
            return .peerPresenceRelayed(PeerPresenceRelayed(origin: NodeID(u64()), entries: presenceReports()))
        case .peerPresenceWithdrawn:
            return .peerPresenceWithdrawn(
                PeerPresenceWithdrawn(origins: Set((0..<int(1...4)).map { _ in NodeID(u64()) }).sorted()))
        }
    }

    mutating func presenceReports() -> [PeerPresence.Entry] {
        (0..<int(1...4)).map { _ in
            PeerPresence.Entry(
                user: user(), devices: u32(),
                choice: optional { PresenceChoice(status: PresenceStatus.allCases[$0.int(1...4)], at: $0.hlc()) },
                at: hlc())
        }
    }

    mutating func anyFrame() -> Frame { frame(FrameType.allCases[int(0...(FrameType.allCases.count - 1))]) }
}
