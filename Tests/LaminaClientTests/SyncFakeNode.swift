import Foundation
import LaminaModel
import LaminaWire

@testable import LaminaClient

/// What the fake node has seen, for waiting and asserting.
struct NodeSnapshot: Sendable {
    /// Messages applied, in the order applied (each once).
    var appliedMessages: [MessageID] = []
    /// Every SEND_MESSAGE received, duplicates included.
    var sendAttempts: [MessageID] = []
    var commands: [FrameType] = []
    var tokensAccepted = 0
    var resumes = 0
    var liveSessions = 0
    var connections = 0
    var receipts: [DeliveryReceipt] = []
    var typing: [Typing] = []
    /// Sessions ended by END_SESSION (their tokens revoked).
    var endedSessions = 0
    /// Frames received while the node was held (`holdAtNextCreation`), not processed yet.
    var held: [FrameType] = []
}

/// An in-memory node that speaks the protocol minimally: HELLO/WELCOME, nonces and tokens
/// ("<user>|<nonce>"), session resumption and expiry, a change feed per user with SYNC from
/// a cursor and live pushes, and the commands, each acknowledged once and de-duplicated by
/// its client-chosen id (SPEC §7).
actor FakeNode {
    private struct Session {
        var channel: FakeChannelEnd
        var user: UserID?
        var token: String?
        var live = false
    }

    private var sessions: [ObjectIdentifier: Session] = [:]
    /// The client's end of every stream opened, in order.
    private(set) var clientEnds: [FakeChannelEnd] = []
    private var nonceCounter = 0
    private var nonces: Set<String> = []
    private var sessionTokens: [String: UserID] = [:]
    private var feeds: [UserID: [Change]] = [:]
    private var conversations: [ConversationID: Conversation] = [:]
    private var aliases: [ConversationID: ConversationID] = [:]
    private var visible: [ConversationID: Set<UserID>] = [:]
    private var messages: [MessageID: Message] = [:]
    private var messageFrames: [MessageID: SendMessage] = [:]
    private var acks: [UUID: Ack] = [:]
    private var clock: UInt64 = 0
    private(set) var snapshot = NodeSnapshot()
    private var waiters:
        [(id: UUID, condition: @Sendable (NodeSnapshot) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []

    /// While false, `connect` fails (the network is down).
    private(set) var reachable = true
    private var reachabilityWaiters: [CheckedContinuation<Void, Never>] = []
    /// Apply this message durably, then drop the stream before the ACK.
    var dropBeforeAck: MessageID?
    /// Answer the next SEND_MESSAGE with this error instead (retryAfter for transient codes).
    var rejectNextSend: (WireError.Code, UInt32?)?
    /// Answer the next CREATE_CONVERSATION with this error instead.
    var rejectNextCreation: (WireError.Code, UInt32?)?

    /// When set, the next CREATE_CONVERSATION and every frame after it wait unprocessed
    /// (and unanswered) until `release`: what the client sends before any answer.
    private var holdAtNextCreation = false
    private var unanswered: Set<FrameType> = []
    private var heldFrames: [(Frame, FakeChannelEnd)]?

    let features: FeatureSet

    init(features: FeatureSet = .all) { self.features = features }

    // MARK: test controls

    func setReachable(_ value: Bool) {
        reachable = value
        if value {
            let waiting = reachabilityWaiters
            reachabilityWaiters.removeAll()
            waiting.forEach { $0.resume() }
        } else {
            dropAll()
        }
    }

    func setDropBeforeAck(_ id: MessageID?) { dropBeforeAck = id }
    func setHoldAtNextCreation() { holdAtNextCreation = true }
    /// Frames of these types are recorded but never answered.
    func setUnanswered(_ types: Set<FrameType>) { unanswered = types }
    func setRejectNextCreation(_ code: WireError.Code, retryAfter: UInt32? = nil) {
        rejectNextCreation = (code, retryAfter)
    }

    /// Processes the held frames in the order received, and stops holding.
    func release() {
        let frames = heldFrames ?? []
        heldFrames = nil
        for (frame, end) in frames { process(frame, on: end) }
    }
    func setRejectNextSend(_ code: WireError.Code, retryAfter: UInt32? = nil) { rejectNextSend = (code, retryAfter) }

    /// Suspends until the node is reachable (what a test's reconnect sleep waits for).
    func waitUntilReachable() async {
        if reachable { return }
        await withCheckedContinuation { reachabilityWaiters.append($0) }
    }

    /// Closes every stream (a network drop).
    func dropAll() {
        for s in sessions.values { s.channel.closeBoth() }
        sessions.removeAll()
        refreshLive()
    }

    /// Expires every session token and ends every session with a fatal `session-expired`.
    func expireSessions() {
        sessionTokens.removeAll()
        for s in sessions.values {
            s.channel.deliver(.error(ErrorFrame(code: .sessionExpired, reason: "the session expired", isFatal: true)))
            s.channel.closeBoth()
        }
        sessions.removeAll()
        refreshLive()
    }

    /// Forgets who every open stream is authenticated as (a node restart that kept the
    /// streams): their next command gets `authentication-required`.
    func forgetSessions() {
        sessionTokens.removeAll()
        for key in sessions.keys { sessions[key]?.user = nil }
    }

    /// Waits until `condition` holds for the node's snapshot.
    func waitUntil(_ condition: @escaping @Sendable (NodeSnapshot) -> Bool) async {
        if condition(snapshot) { return }
        await withCheckedContinuation { waiters.append((UUID(), condition, $0)) }
    }

    private func changed() {
        let ready = waiters.filter { $0.condition(snapshot) }
        waiters.removeAll { w in ready.contains { $0.id == w.id } }
        ready.forEach { $0.continuation.resume() }
    }

    private func refreshLive() {
        snapshot.liveSessions = sessions.values.filter(\.live).count
        changed()
    }

    // MARK: connections

    /// A new stream (throws `.disconnected` while unreachable).
    func connect() throws(ClientError) -> FakeChannelEnd {
        guard reachable else { throw ClientError(.disconnected, "the fake node is unreachable") }
        let (client, node) = FakeChannelEnd.pair()
        clientEnds.append(client)
        sessions[ObjectIdentifier(node)] = Session(channel: node)
        snapshot.connections += 1
        changed()
        Task { await self.serve(node) }
        return client
    }

    private func serve(_ end: FakeChannelEnd) async {
        while let frame = try? await end.receive() {
            if holdAtNextCreation, case .createConversation = frame {
                holdAtNextCreation = false
                heldFrames = []
            }
            if heldFrames != nil {
                heldFrames?.append((frame, end))
                snapshot.held.append(frame.type)
                changed()
                continue
            }
            process(frame, on: end)
        }
        sessions[ObjectIdentifier(end)] = nil
        refreshLive()
    }

    private func process(_ frame: Frame, on end: FakeChannelEnd) {
        let key = ObjectIdentifier(end)
        guard var session = sessions[key] else { return }
        defer { changed() }
        switch frame {
        case .hello:
            end.deliver(
                .welcome(
                    Welcome(
                        version: 1, features: features, nodeID: NodeID(1),
                        serverTime: Timestamp(millisecondsSince1970: 1), maxFrameSize: 4 << 20)))
            return
        case .ping(let p):
            end.deliver(.pong(p))
            return
        case .nonceRequest(let r):
            end.deliver(.nonce(issueNonce(r.requestID)))
            return
        case .authenticate(let a):
            let parts = a.identityToken.split(separator: "|", maxSplits: 1).map(String.init)
            guard parts.count == 2, nonces.remove(parts[1]) != nil, let user = try? UserID(parts[0]) else {
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: a.requestID, code: .badSignature, reason: "the token does not verify",
                            isFatal: false)))
                return
            }
            snapshot.tokensAccepted += 1
            authenticate(&session, user: user, requestID: a.requestID, key: key)
            return
        case .resumeSession(let r):
            guard let user = sessionTokens[r.sessionToken] else {
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: r.requestID, code: .sessionExpired, reason: "the session expired", isFatal: false
                        )))
                end.deliver(.nonce(issueNonce(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))))
                return
            }
            snapshot.resumes += 1
            authenticate(&session, user: user, requestID: r.requestID, key: key)
            return
        case .endSession(let r) where session.user != nil:
            if let token = session.token { sessionTokens[token] = nil }
            snapshot.endedSessions += 1
            end.deliver(.ack(Ack(requestID: r.requestID)))
            sessions[key] = nil
            end.closeBoth()
            refreshLive()
            return
        default:
            break
        }
        guard let user = session.user else {
            if let id = frame.commandID {
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: id, code: .authenticationRequired, reason: "authenticate first", isFatal: false))
                )
            }
            return
        }
        snapshot.commands.append(frame.type)
        if unanswered.contains(frame.type) { return }
        switch frame {
        case .sync(let s):
            let head = feeds[user]?.last?.seq ?? 0
            guard s.cursor <= head else {  // as the node: a cursor it never gave out
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: s.requestID, code: .invalidArgument,
                            reason: "cursor \(s.cursor) is beyond the feed head \(head)", isFatal: false)))
                return
            }
            let entries = (feeds[user] ?? []).filter { $0.seq > s.cursor }
            var start = 0
            while start < entries.count {
                let chunk = Array(entries[start..<min(start + 256, entries.count)])
                start += chunk.count
                end.deliver(chunk.count == 1 ? .change(chunk[0]) : .changeBatch(ChangeBatch(changes: chunk)))
            }
            end.deliver(.ack(Ack(requestID: s.requestID, cursor: feeds[user]?.last?.seq ?? s.cursor)))
            session.live = true
            sessions[key] = session
            refreshLive()
        case .createConversation(let c):
            if let ack = acks[c.conversationID.uuid] {
                end.deliver(.ack(ack))
                return
            }
            if let (code, retryAfter) = rejectNextCreation {
                rejectNextCreation = nil
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: c.conversationID.uuid, code: code, reason: "rejected by the test",
                            isFatal: false, retryAfterMilliseconds: retryAfter)))
                return
            }
            var participants = c.participants
            participants.insert(user)
            if c.options.isDistinct,
                let existing = conversations.values.first(where: { $0.isDistinct && $0.participants == participants })
            {
                aliases[c.conversationID] = existing.id
                answer(Ack(requestID: c.conversationID.uuid, conversationID: existing.id), on: end)
                return
            }
            let conversation = Conversation(
                id: c.conversationID, participants: participants, isDistinct: c.options.isDistinct,
                metadata: c.options.metadata,
                deliveryReceiptsEnabled: c.options.deliveryReceiptsEnabled,
                readReceiptsEnabled: c.options.readReceiptsEnabled, createdAt: tick(), creator: user)
            conversations[conversation.id] = conversation
            visible[conversation.id] = [user]
            append(.conversationCreated(conversation), to: [user])
            answer(Ack(requestID: c.conversationID.uuid, conversationID: conversation.id), on: end)
        case .sendMessage(let m):
            snapshot.sendAttempts.append(m.messageID)
            if let ack = acks[m.messageID.uuid] {
                if messageFrames[m.messageID] == m {
                    end.deliver(.ack(ack))
                } else {
                    end.deliver(
                        .error(
                            ErrorFrame(requestID: m.messageID.uuid, code: .idInUse, reason: "id in use", isFatal: false)
                        ))
                }
                return
            }
            if let (code, retryAfter) = rejectNextSend {
                rejectNextSend = nil
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: m.messageID.uuid, code: code, reason: "rejected by the test", isFatal: false,
                            retryAfterMilliseconds: retryAfter)))
                return
            }
            let cid = aliases[m.conversationID] ?? m.conversationID
            guard let conversation = conversations[cid], conversation.participants.contains(user) else {
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: m.messageID.uuid, code: .notFound, reason: "no such conversation", isFatal: false
                        )))
                return
            }
            let sentAt = tick()
            let position = MessagePosition(physical: UInt64(sentAt.millisecondsSince1970), logical: 0, node: NodeID(1))
            var statuses: [UserID: RecipientStatus] = [:]
            for p in conversation.participants { statuses[p] = p == user ? .read : .sent }
            let message = Message(
                id: m.messageID, conversationID: cid, sender: user, parts: m.parts, sentAt: sentAt, position: position,
                push: m.push, recipientStatus: statuses)
            messages[message.id] = message
            messageFrames[message.id] = m
            snapshot.appliedMessages.append(message.id)
            // A drop before the ACK drops what the stream would carry after the commit too:
            // the sender learns of its message only by sending it again (or from catch-up).
            let dropped = dropBeforeAck == m.messageID
            if dropped { end.closeBoth() }
            let newcomers = conversation.participants.subtracting(visible[cid] ?? [])
            if !newcomers.isEmpty {
                visible[cid, default: []].formUnion(newcomers)
                append(.conversationCreated(conversation), to: newcomers)
            }
            append(.messageCreated(message), to: conversation.participants)
            let ack = Ack(requestID: m.messageID.uuid, position: position, timestamp: sentAt)
            acks[m.messageID.uuid] = ack
            if dropped {
                dropBeforeAck = nil
                return
            }
            end.deliver(.ack(ack))
        case .markRead(let r):
            setStatus(.read, of: [r.messageID], by: user)
            answer(Ack(requestID: r.requestID), on: end)
        case .markAllRead(let r):
            let ids = messages.values.filter {
                $0.conversationID == r.conversationID && $0.position.map { $0 <= r.upTo } == true
            }.map(\.id)
            setStatus(.read, of: ids, by: user)
            answer(Ack(requestID: r.requestID), on: end)
        case .deliveryReceipt(let r):
            snapshot.receipts.append(r)
            let ids = messages.values.filter {
                $0.conversationID == r.conversationID && $0.sender != user && $0.position.map { $0 <= r.upTo } == true
            }
            .sorted { $0.position! < $1.position! }.map(\.id)
            setStatus(.delivered, of: ids, by: user)
            answer(Ack(requestID: r.requestID), on: end)
        case .addParticipants(let u), .removeParticipants(let u):
            guard var c = conversations[u.conversationID] else {
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: u.requestID, code: .notFound, reason: "no such conversation", isFatal: false)))
                return
            }
            let before = c.participants
            let adding = { if case .addParticipants = frame { true } else { false } }()
            if adding { c.participants.formUnion(u.users) } else { c.participants.subtract(u.users) }
            if c.participants != before { c.isDistinct = false }
            conversations[c.id] = c
            append(
                .participantsChanged(
                    ParticipantsChanged(
                        conversationID: c.id, added: adding ? u.users : [], removed: adding ? [] : u.users, by: user,
                        at: hlc())), to: before.union(c.participants))
            answer(Ack(requestID: u.requestID), on: end)
        case .setMetadata(let s):
            append(
                .metadataChanged(
                    MetadataChanged(
                        conversationID: s.conversationID, keyPath: s.keyPath, value: s.value, by: user, at: hlc())),
                to: conversations[s.conversationID]?.participants ?? [user])
            answer(Ack(requestID: s.requestID), on: end)
        case .deleteMetadata(let s):
            append(
                .metadataChanged(
                    MetadataChanged(
                        conversationID: s.conversationID, keyPath: s.keyPath, value: nil, by: user, at: hlc())),
                to: conversations[s.conversationID]?.participants ?? [user])
            answer(Ack(requestID: s.requestID), on: end)
        case .deleteConversation(let d):
            let to: Set<UserID> =
                d.mode == .allParticipants ? (conversations[d.conversationID]?.participants ?? [user]) : [user]
            append(
                .conversationDeleted(ConversationDeleted(conversationID: d.conversationID, mode: d.mode, by: user)),
                to: to)
            answer(Ack(requestID: d.requestID), on: end)
        case .deleteMessage(let d):
            let to: Set<UserID> =
                d.mode == .allParticipants ? (conversations[d.conversationID]?.participants ?? [user]) : [user]
            append(
                .messageDeleted(
                    MessageDeleted(conversationID: d.conversationID, messageID: d.messageID, mode: d.mode, by: user)),
                to: to)
            answer(Ack(requestID: d.requestID), on: end)
        case .typing(let t):
            snapshot.typing.append(t)
            for (_, s) in sessions
            where s.live && s.user != user && (conversations[t.conversationID]?.participants.contains(s.user!) ?? false)
            {
                s.channel.deliver(
                    .change(
                        Change(
                            seq: 0,
                            event: .typing(TypingChanged(conversationID: t.conversationID, user: user, state: t.state)))
                    ))
            }
        case .setNotificationLevel(let f):
            // As the node: `forbidden` unless the session agreed the notification levels feature.
            guard features.contains(.notificationLevels) else {
                end.deliver(
                    .error(
                        ErrorFrame(
                            requestID: f.requestID, code: .forbidden, reason: "the session lacks notification levels",
                            isFatal: false)))
                return
            }
            answer(Ack(requestID: f.requestID, conversationID: f.conversationID), on: end)
        default:
            end.deliver(.error(ErrorFrame(code: .unexpectedFrame, reason: "not a client frame", isFatal: true)))
            end.closeBoth()
        }
    }

    private func issueNonce(_ requestID: UUID) -> Nonce {
        nonceCounter += 1
        let nonce = "nonce-\(nonceCounter)"
        nonces.insert(nonce)
        return Nonce(requestID: requestID, nonce: nonce, expiresAt: Timestamp(millisecondsSince1970: 600_000))
    }

    private func authenticate(_ session: inout Session, user: UserID, requestID: UUID, key: ObjectIdentifier) {
        let token = "session-\(UUID().uuidString)"
        sessionTokens[token] = user
        session.user = user
        session.token = token
        sessions[key] = session
        session.channel.deliver(
            .authenticated(
                Authenticated(
                    requestID: requestID, sessionToken: token,
                    identity: Identity(userID: user, displayName: user.rawValue.capitalized),
                    expiresAt: Timestamp(millisecondsSince1970: 3_600_000))))
    }

    private func answer(_ ack: Ack, on end: FakeChannelEnd) {
        acks[ack.requestID] = ack
        end.deliver(.ack(ack))
    }

    private func tick() -> Timestamp {
        clock += 1
        return Timestamp(millisecondsSince1970: Int64(1_000 + clock))
    }

    private func hlc() -> HLCTimestamp {
        HLCTimestamp(physical: UInt64(tick().millisecondsSince1970), logical: 0, node: NodeID(1))
    }

    private func setStatus(_ status: RecipientStatus, of ids: [MessageID], by user: UserID) {
        for id in ids {
            guard var m = messages[id], (m.recipientStatus[user] ?? .invalid) < status else { continue }
            m.recipientStatus[user] = status
            messages[id] = m
            let participants = conversations[m.conversationID]?.participants ?? [user]
            append(
                .messageStatusChanged(
                    MessageStatusChanged(conversationID: m.conversationID, messageID: id, user: user, status: status)),
                to: participants)
        }
    }

    /// Appends an entry to each user's feed and pushes it to their live sessions.
    private func append(_ event: ChangeEvent, to users: Set<UserID>) {
        for user in users.sorted() {
            let seq = UInt64((feeds[user]?.count ?? 0) + 1)
            let change = Change(seq: seq, event: event)
            feeds[user, default: []].append(change)
            for s in sessions.values where s.live && s.user == user { s.channel.deliver(.change(change)) }
        }
    }
}
