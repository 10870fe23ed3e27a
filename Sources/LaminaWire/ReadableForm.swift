import Foundation
import LaminaMerge
import LaminaModel

// The readable JSON form of frames (SPEC §10). 64-bit integers are decimal strings (JSON
// numbers lose precision above 2^53); UUIDs are lowercase hyphenated strings; bytes are
// lowercase hex; absent optionals are null; sets and maps follow the wire order.

extension Frame {
    /// The frame in the readable form of `Protocol/vectors`: `{"type": "<name>", ...fields}`.
    public var readableJSON: WireJSON {
        var o: [String: WireJSON] = ["type": .string(type.name)]
        switch self {
        case .hello(let f):
            o["minVersion"] = .number(Int64(f.minVersion))
            o["maxVersion"] = .number(Int64(f.maxVersion))
            o["features"] = .u64(f.features.rawValue)
            o["agent"] = .string(f.agent)
        case .welcome(let f):
            o["version"] = .number(Int64(f.version))
            o["features"] = .u64(f.features.rawValue)
            o["nodeID"] = .u64(f.nodeID.rawValue)
            o["serverTime"] = .timestamp(f.serverTime)
            o["maxFrameSize"] = .number(Int64(f.maxFrameSize))
            o["cluster"] = .string(f.cluster)
        case .nonceRequest(let f):
            o["requestID"] = .uuid(f.requestID)
        case .endSession(let f):
            o["requestID"] = .uuid(f.requestID)
        case .blockUser(let f):
            o["requestID"] = .uuid(f.requestID)
            o["user"] = .string(f.user.rawValue)
            o["blocking"] = .bool(f.blocking)
        case .setPresence(let f):
            o["requestID"] = .uuid(f.requestID)
            o["status"] = .string(f.status.name)
        case .followUser(let f):
            o["requestID"] = .uuid(f.requestID)
            o["user"] = .string(f.user.rawValue)
            o["following"] = .bool(f.following)
        case .createChannel(let f):
            o["channelID"] = .uuid(f.channelID.uuid)
            o["name"] = .string(f.name.rawValue)
        case .joinChannel(let f), .leaveChannel(let f), .deleteChannel(let f):
            o["requestID"] = .uuid(f.requestID)
            o["channelID"] = .uuid(f.channelID.uuid)
        case .sendChannelMessage(let f):
            o["messageID"] = .uuid(f.messageID.uuid)
            o["channelID"] = .uuid(f.channelID.uuid)
            o["parts"] = .array(f.parts.map(WireJSON.part))
        case .fetchChannel(let f):
            o["requestID"] = .uuid(f.requestID)
            o["channelID"] = .uuid(f.channelID.uuid)
            o["after"] = .number(Int64(clamping: f.after))
            o["count"] = .number(Int64(f.count))
        case .registerPushToken(let f):
            o["requestID"] = .uuid(f.requestID)
            o["kind"] = .string(f.token?.kind.name ?? "none")
            switch f.token {
            case nil:
                o["token"] = .null
                o["topic"] = .null
                o["environment"] = .null
            case .apns(_, let topic, let environment)?:
                o["token"] = .string(f.token!.tokenText)
                o["topic"] = .string(topic)
                o["environment"] = .string(environment.name)
            case .fcm(let token)?, .gateway(let token)?:
                o["token"] = .string(token)
                o["topic"] = .null
                o["environment"] = .null
            }
        case .nonce(let f):
            o["requestID"] = .uuid(f.requestID)
            o["nonce"] = .string(f.nonce)
            o["expiresAt"] = .timestamp(f.expiresAt)
        case .authenticate(let f):
            o["requestID"] = .uuid(f.requestID)
            o["identityToken"] = .string(f.identityToken)
            o["deviceID"] = .uuid(f.deviceID)
        case .authenticated(let f):
            o["requestID"] = .uuid(f.requestID)
            o["sessionToken"] = .string(f.sessionToken)
            o["userID"] = .string(f.identity.userID.rawValue)
            o["displayName"] = f.identity.displayName.map(WireJSON.string) ?? .null
            o["avatarURL"] = f.identity.avatarURL.map(WireJSON.string) ?? .null
            o["expiresAt"] = .timestamp(f.expiresAt)
        case .resumeSession(let f):
            o["requestID"] = .uuid(f.requestID)
            o["sessionToken"] = .string(f.sessionToken)
            o["deviceID"] = .uuid(f.deviceID)
        case .ping(let f), .pong(let f):
            o["payload"] = .u64(f.payload)
        case .ack(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = f.conversationID.map { .uuid($0.uuid) } ?? .null
            o["position"] = f.position.map(WireJSON.hlc) ?? .null
            o["timestamp"] = f.timestamp.map(WireJSON.timestamp) ?? .null
            o["cursor"] = f.cursor.map(WireJSON.u64) ?? .null
        case .error(let f):
            o["requestID"] = f.requestID.map(WireJSON.uuid) ?? .null
            o["code"] = .string(f.code.name)
            o["reason"] = .string(f.reason)
            o["fatal"] = .bool(f.isFatal)
            o["retryAfterMilliseconds"] = f.retryAfterMilliseconds.map { .number(Int64($0)) } ?? .null
            o["conversationID"] = f.conversationID.map { .uuid($0.uuid) } ?? .null
        case .createConversation(let f):
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["distinct"] = .bool(f.options.isDistinct)
            o["deliveryReceipts"] = .bool(f.options.deliveryReceiptsEnabled)
            o["readReceipts"] = .bool(f.options.readReceiptsEnabled)
            o["participants"] = .users(f.participants)
            o["metadata"] = .metadata(f.options.metadata.values)
        case .addParticipants(let f), .removeParticipants(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["users"] = .users(f.users)
        case .setMetadata(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["keyPath"] = .keyPath(f.keyPath)
            o["value"] = .metadataValue(f.value)
        case .deleteMetadata(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["keyPath"] = .keyPath(f.keyPath)
        case .deleteConversation(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["mode"] = .deletionMode(f.mode)
            o["below"] = f.below.map(WireJSON.hlc) ?? .null
        case .markAllRead(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["upTo"] = .hlc(f.upTo)
        case .typing(let f):
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["state"] = .typingState(f.state)
        case .setNotificationLevel(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["level"] = .notificationLevel(f.level)
            o["until"] = f.until.map(WireJSON.timestamp) ?? .null
        case .sendMessage(let f):
            o["messageID"] = .uuid(f.messageID.uuid)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            if let replyTo = f.replyTo { o["replyTo"] = .uuid(replyTo.uuid) }
            o["parts"] = .array(f.parts.map(WireJSON.part))
            o["push"] = f.push.map(WireJSON.push) ?? .null
        case .markRead(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["messageID"] = .uuid(f.messageID.uuid)
        case .deleteMessage(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["messageID"] = .uuid(f.messageID.uuid)
            o["mode"] = .deletionMode(f.mode)
        case .updateMessageParts(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["messageID"] = .uuid(f.messageID.uuid)
            o["parts"] = .array(f.parts.map(WireJSON.part))
        case .react(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["messageID"] = .uuid(f.messageID.uuid)
            o["key"] = .string(f.key)
            o["op"] = .string(f.op.name)
        case .deliveryReceipt(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["upTo"] = .hlc(f.upTo)
        case .sync(let f):
            o["requestID"] = .uuid(f.requestID)
            o["cursor"] = .u64(f.cursor)
        case .fetchHistory(let f):
            o["requestID"] = .uuid(f.requestID)
            o["conversationID"] = .uuid(f.conversationID.uuid)
            o["after"] = .null
            switch f.policy {
            case .complete:
                o["policy"] = .string("complete")
                o["count"] = .null
            case .unreadOnly:
                o["policy"] = .string("unread-only")
                o["count"] = .null
            case .lastN(let n):
                o["policy"] = .string("last-n")
                o["count"] = .number(Int64(n))
            case .pageAfter(let after, let count):
                o["policy"] = .string("page-after")
                o["count"] = .number(Int64(count))
                o["after"] = after.map(WireJSON.hlc) ?? .null
            case .thread(let root, let after, let count):
                o["policy"] = .string("thread")
                o["count"] = .number(Int64(count))
                o["after"] = after.map(WireJSON.hlc) ?? .null
                o["root"] = .uuid(root.uuid)
            }
            o["before"] = f.before.map(WireJSON.hlc) ?? .null
        case .searchMessages(let f):
            o["requestID"] = .uuid(f.requestID)
            o["text"] = .string(f.text)
            o["conversationID"] = f.conversationID.map { WireJSON.uuid($0.uuid) } ?? .null
            o["limit"] = .number(Int64(f.limit))
            o["offset"] = .number(Int64(f.offset))
        case .change(let f):
            o["seq"] = .u64(f.seq)
            o["event"] = .event(f.event)
        case .changeBatch(let f):
            o["changes"] = .array(f.changes.map { .object(["seq": .u64($0.seq), "event": .event($0.event)]) })
        case .peerHello(let f):
            o["nodeID"] = .u64(f.nodeID.rawValue)
            o["minVersion"] = .number(Int64(f.minVersion))
            o["maxVersion"] = .number(Int64(f.maxVersion))
            o["features"] = .u64(f.features.rawValue)
            o["cluster"] = .string(f.cluster)
        case .versionVector(let f):
            o["counters"] = .vector(f)
        case .replicate(let f):
            o["operations"] = .array(
                f.operations.map {
                    .object([
                        "origin": .u64($0.origin.rawValue), "counter": .u64($0.counter), "hlc": .hlc($0.hlc),
                        "event": .replicated($0.payload),
                    ])
                })
        case .peerAck(let f):
            o["counters"] = .vector(f.vector)
        case .peerPresence(let f):
            o["reports"] = Frame.reports(f.entries)
        case .peerPresenceRelayed(let f):
            o["origin"] = .u64(f.origin.rawValue)
            o["reports"] = Frame.reports(f.entries)
        case .peerPresenceWithdrawn(let f):
            o["origins"] = .array(f.origins.map { .u64($0.rawValue) })
        }
        return .object(o)
    }

    /// PEER_PRESENCE's and PEER_PRESENCE_RELAYED's reports.
    static func reports(_ entries: [PeerPresence.Entry]) -> WireJSON {
        .array(
            entries.map { e in
                .object([
                    "user": .string(e.user.rawValue), "devices": .number(Int64(e.devices)),
                    "choice": e.choice.map { .object(["status": .string($0.status.name), "at": .hlc($0.at)]) }
                        ?? .null,
                    "at": .hlc(e.at),
                ])
            })
    }
}

extension WireJSON {
    static func u64(_ v: UInt64) -> WireJSON { .string(String(v)) }
    static func timestamp(_ t: Timestamp) -> WireJSON { .string(String(t.millisecondsSince1970)) }
    static func uuid(_ u: UUID) -> WireJSON { .string(u.uuidString.lowercased()) }
    static func hex(_ bytes: [UInt8]) -> WireJSON { .string(Hex.encode(bytes)) }
    static func hlc(_ h: HLCTimestamp) -> WireJSON {
        .object(["physical": .u64(h.physical), "logical": .number(Int64(h.logical)), "node": .u64(h.node.rawValue)])
    }
    static func users(_ users: Set<UserID>) -> WireJSON { .array(users.sorted().map { .string($0.rawValue) }) }
    static func keyPath(_ p: MetadataKeyPath) -> WireJSON { .array(p.components.map(WireJSON.string)) }
    static func metadata(_ m: [String: MetadataValue]) -> WireJSON { .object(m.mapValues(metadataValue)) }
    static func metadataValue(_ v: MetadataValue) -> WireJSON {
        switch v {
        case .string(let s): .string(s)
        case .dictionary(let d): metadata(d)
        }
    }
    static func deletionMode(_ m: DeletionMode) -> WireJSON {
        .string(m == .myDevices ? "my-devices" : "all-participants")
    }
    /// `all`, `mentions` or `none` (SPEC §6.10).
    static func notificationLevel(_ l: NotificationLevel) -> WireJSON {
        switch l {
        case .all: .string("all")
        case .mentions: .string("mentions")
        case .none: .string("none")
        }
    }
    static func typingState(_ s: TypingState) -> WireJSON {
        switch s {
        case .started: .string("started")
        case .paused: .string("paused")
        case .finished: .string("finished")
        }
    }
    static func part(_ p: MessagePart) -> WireJSON {
        var o: [String: WireJSON] = ["id": .uuid(p.id), "mimeType": .string(p.mimeType.rawValue)]
        switch p.content {
        case .inline(let bytes): o["inline"] = .hex(bytes)
        case .external(let ref):
            o["reference"] = .object([
                "contentID": .uuid(ref.id.uuid), "size": .u64(ref.size), "sha256": .hex(ref.sha256),
            ])
        }
        return .object(o)
    }
    static func push(_ p: PushConfiguration) -> WireJSON {
        .object([
            "alert": p.alert.map(WireJSON.string) ?? .null,
            "sound": p.sound.map(WireJSON.string) ?? .null,
            "title": p.title.map(WireJSON.string) ?? .null,
            "category": p.category.map(WireJSON.string) ?? .null,
            "data": .object(p.data.mapValues(WireJSON.string)),
        ])
    }
    static func conversation(_ c: Conversation) -> WireJSON {
        .object([
            "id": .uuid(c.id.uuid), "creator": .string(c.creator.rawValue), "createdAt": .timestamp(c.createdAt),
            "distinct": .bool(c.isDistinct), "deliveryReceipts": .bool(c.deliveryReceiptsEnabled),
            "readReceipts": .bool(c.readReceiptsEnabled),
            "participants": .users(c.participants), "metadata": .metadata(c.metadata.values),
        ])
    }
    static func message(_ m: Message) -> WireJSON {
        guard case .object(var o) = plainMessage(m) else { return plainMessage(m) }
        if let root = m.replyTo { o["replyTo"] = .uuid(root.uuid) }
        if let t = m.thread {
            o["thread"] = .object([
                "replyCount": .u64(t.replyCount), "lastReply": .uuid(t.lastReply.uuid),
                "lastReplyAt": .hlc(t.lastReplyAt),
            ])
        }
        return .object(o)
    }
    static func plainMessage(_ m: Message) -> WireJSON {
        .object([
            "id": .uuid(m.id.uuid), "conversationID": .uuid(m.conversationID.uuid),
            "sender": .string(m.sender.rawValue),
            "sentAt": m.sentAt.map(WireJSON.timestamp) ?? .null, "position": m.position.map(WireJSON.hlc) ?? .null,
            "parts": .array(m.parts.map(WireJSON.part)), "push": m.push.map(WireJSON.push) ?? .null,
            "recipientStatus": .object(
                Dictionary(
                    uniqueKeysWithValues: m.recipientStatus.map {
                        ($0.key.rawValue, WireJSON.number(Int64($0.value.rawValue)))
                    })),
        ])
    }
    static func vector(_ v: VersionVector) -> WireJSON {
        .array(
            v.counters.keys.sorted().map { .object(["node": .u64($0.rawValue), "counter": .u64(v.counters[$0] ?? 0)]) })
    }
    static func replicated(_ e: ReplicatedEvent) -> WireJSON {
        switch e {
        case .change(let change): return event(change)
        case .distinctCreation(let d):
            return .object([
                "kind": .string("distinct-created"), "conversation": .conversation(d.conversation),
                "seen": vector(d.seen),
            ])
        case .partsEdited(let e):
            return .object([
                "kind": .string("message-parts-edited"), "conversationID": .uuid(e.conversationID.uuid),
                "messageID": .uuid(e.messageID.uuid), "parts": .array(e.parts.map(WireJSON.part)),
                "set": .array(e.parts.filter { e.set.contains($0.id) }.map { .uuid($0.id) }),
                "removed": .array(MessagePartsEdited.ascending(e.removed).map { .uuid($0) }),
                "by": .string(e.by.rawValue), "at": .hlc(e.at),
            ])
        case .user(let u):
            var o: [String: WireJSON] = [:]
            switch u {
            case .identity(let i):
                o["kind"] = .string("identity")
                o["user"] = .string(i.user.rawValue)
                if let identity = i.identity {
                    o["values"] = .object(identity.values.mapValues { .string($0) })
                    o["metadata"] = .object(identity.metadata.mapValues { .string($0) })
                } else {
                    o["identity"] = .null
                }
            case .block(let c):
                o["kind"] = .string("block")
                o["blocker"] = .string(c.blocker.rawValue)
                o["blocked"] = .string(c.blocked.rawValue)
                o["blocking"] = .bool(c.blocking)
            case .badge(let c):
                o["kind"] = .string("badge")
                o["user"] = .string(c.user.rawValue)
                o["externalUnreadCount"] = .u64(c.externalUnreadCount)
            case .sessionsRevoked(let user):
                o["kind"] = .string("sessions-revoked")
                o["user"] = .string(user.rawValue)
            case .pushRegistration(let r):
                o["kind"] = .string("push-registration")
                o["user"] = .string(r.user.rawValue)
                o["device"] = uuid(r.device)
                o["node"] = .u64(r.node.rawValue)
            case .suspension(let s):
                o["kind"] = .string("suspension")
                o["user"] = .string(s.user.rawValue)
                o["suspended"] = .bool(s.suspended)
            case .follow(let f):
                o["kind"] = .string("follow")
                o["follower"] = .string(f.follower.rawValue)
                o["followed"] = .string(f.followed.rawValue)
                o["following"] = .bool(f.following)
            case .notificationLevel(let n):
                o["kind"] = .string("notification-level")
                o["user"] = .string(n.user.rawValue)
                o["conversationID"] = uuid(n.conversationID.uuid)
                o["level"] = notificationLevel(n.level)
                o["until"] = n.until.map(WireJSON.timestamp) ?? .null
            }
            return .object(o)
        }
    }

    static func event(_ e: ChangeEvent) -> WireJSON {
        var o: [String: WireJSON] = [:]
        switch e {
        case .conversationCreated(let c):
            o["kind"] = .string("conversation-created")
            o["conversation"] = .conversation(c)
        case .conversationUpdated(let u):
            o["kind"] = .string("conversation-updated")
            o["conversationID"] = .uuid(u.conversationID.uuid)
            o["distinct"] = .bool(u.isDistinct)
            o["deliveryReceipts"] = .bool(u.deliveryReceiptsEnabled)
            o["readReceipts"] = .bool(u.readReceiptsEnabled)
            o["messageCount"] = .u64(u.messageCount)
            o["unreadCount"] = .u64(u.unreadCount)
            o["lastMessageID"] = u.lastMessageID.map { .uuid($0.uuid) } ?? .null
        case .participantsChanged(let p):
            o["kind"] = .string("participants-changed")
            o["conversationID"] = .uuid(p.conversationID.uuid)
            o["added"] = .users(p.added)
            o["removed"] = .users(p.removed)
            o["by"] = .string(p.by.rawValue)
            o["at"] = .hlc(p.at)
        case .metadataChanged(let m):
            o["kind"] = .string("metadata-changed")
            o["conversationID"] = .uuid(m.conversationID.uuid)
            o["keyPath"] = .keyPath(m.keyPath)
            o["value"] = m.value.map(WireJSON.metadataValue) ?? .null
            o["by"] = .string(m.by.rawValue)
            o["at"] = .hlc(m.at)
        case .conversationDeleted(let d):
            o["kind"] = .string("conversation-deleted")
            o["conversationID"] = .uuid(d.conversationID.uuid)
            o["mode"] = .deletionMode(d.mode)
            o["below"] = d.below.map(WireJSON.hlc) ?? .null
            o["by"] = .string(d.by.rawValue)
        case .identifierChanged(let i):
            o["kind"] = .string("identifier-changed")
            o["from"] = .uuid(i.from.uuid)
            o["to"] = .uuid(i.to.uuid)
        case .messageCreated(let m):
            o["kind"] = .string(m.hasThreadFields ? "thread-message" : "message-created")
            o["message"] = .message(m)
        case .messageStatusChanged(let s):
            o["kind"] = .string("message-status-changed")
            o["conversationID"] = .uuid(s.conversationID.uuid)
            o["messageID"] = .uuid(s.messageID.uuid)
            o["user"] = .string(s.user.rawValue)
            o["status"] = .number(Int64(s.status.rawValue))
        case .messageDeleted(let d):
            o["kind"] = .string("message-deleted")
            o["conversationID"] = .uuid(d.conversationID.uuid)
            o["messageID"] = .uuid(d.messageID.uuid)
            o["mode"] = .deletionMode(d.mode)
            o["by"] = .string(d.by.rawValue)
        case .typing(let t):
            o["kind"] = .string("typing")
            o["conversationID"] = .uuid(t.conversationID.uuid)
            o["user"] = .string(t.user.rawValue)
            o["state"] = .typingState(t.state)
        case .statusUpTo(let s):
            o["kind"] = .string("status-up-to")
            o["conversationID"] = .uuid(s.conversationID.uuid)
            o["user"] = .string(s.user.rawValue)
            o["status"] = .number(Int64(s.status.rawValue))
            o["upTo"] = WireJSON.hlc(s.upTo)
        case .messagePartsChanged(let p):
            o["kind"] = .string("message-parts-changed")
            o["conversationID"] = .uuid(p.conversationID.uuid)
            o["messageID"] = .uuid(p.messageID.uuid)
            o["parts"] = .array(p.parts.map(WireJSON.part))
            o["by"] = .string(p.by.rawValue)
            o["at"] = .hlc(p.at)
        case .blockListChanged(let c):
            o["kind"] = .string("block-list-changed")
            o["user"] = .string(c.user.rawValue)
            o["blocking"] = .bool(c.blocking)
        case .channelCreated(let c):
            o["kind"] = .string("channel-created")
            o["channelID"] = .uuid(c.id.uuid)
            o["name"] = .string(c.name.rawValue)
            o["creator"] = .string(c.creator.rawValue)
            o["createdAt"] = WireJSON.timestamp(c.createdAt)
        case .channelMembershipChanged(let c):
            o["kind"] = .string("channel-membership-changed")
            o["channelID"] = .uuid(c.channelID.uuid)
            o["user"] = .string(c.user.rawValue)
            o["joined"] = .bool(c.joined)
            o["by"] = .string(c.by.rawValue)
            o["at"] = .hlc(c.at)
        case .channelMessage(let m):
            o["kind"] = .string("channel-message")
            o["channelID"] = .uuid(m.channelID.uuid)
            o["messageID"] = .uuid(m.id.uuid)
            o["sender"] = .string(m.sender.rawValue)
            o["sentAt"] = WireJSON.timestamp(m.sentAt)
            o["position"] = .hlc(m.position)
            o["logSeq"] = .number(Int64(clamping: m.logSeq))
            o["parts"] = .array(m.parts.map(WireJSON.part))
        case .reactionsChanged(let r):
            o["kind"] = .string("reactions-changed")
            o["conversationID"] = .uuid(r.conversationID.uuid)
            o["messageID"] = .uuid(r.messageID.uuid)
            o["user"] = .string(r.user.rawValue)
            o["key"] = .string(r.key)
            o["present"] = .bool(r.present)
            o["at"] = .hlc(r.at)
            o["removedTags"] = .array(r.removedTags.map(WireJSON.hlc))
        case .channelDeleted(let d):
            o["kind"] = .string("channel-deleted")
            o["channelID"] = .uuid(d.channelID.uuid)
            o["by"] = .string(d.by.rawValue)
            o["at"] = .hlc(d.at)
        case .followChanged(let c):
            o["kind"] = .string("follow-changed")
            o["user"] = .string(c.user.rawValue)
            o["following"] = .bool(c.following)
        case .notificationLevelChanged(let c):
            o["kind"] = .string("notification-level-changed")
            o["conversationID"] = .uuid(c.conversationID.uuid)
            o["level"] = .notificationLevel(c.level)
            o["until"] = c.until.map(WireJSON.timestamp) ?? .null
        case .presenceChanged(let c):
            o["kind"] = .string("presence-changed")
            o["user"] = .string(c.user.rawValue)
            o["status"] = .string(c.presence.status.name)
            o["lastSeenAt"] = c.presence.lastSeenAt.map(WireJSON.timestamp) ?? .null
        case .identityChanged(let i):
            o["kind"] = .string("identity-changed")
            o["user"] = .string(i.user.rawValue)
            if let identity = i.identity {
                o["values"] = .object(identity.values.mapValues { .string($0) })
                o["metadata"] = .object(identity.metadata.mapValues { .string($0) })
            } else {
                o["identity"] = .null
            }
        }
        return .object(o)
    }
}
