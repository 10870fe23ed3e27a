import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire
import Testing

@testable import LaminaClient

@Suite struct SyncCoreTests {
    let cid = ConversationID.random()
    let mid = MessageID.random()
    let at = HLCTimestamp(physical: 10, logical: 1, node: NodeID(1))

    func commands() throws -> [Frame] {
        let rid = UUID()
        return [
            .createConversation(CreateConversation(conversationID: cid, participants: [bob])),
            .addParticipants(ParticipantsUpdate(requestID: rid, conversationID: cid, users: [carol])),
            .removeParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: cid, users: [carol])),
            .setMetadata(
                SetMetadata(
                    requestID: UUID(), conversationID: cid, keyPath: try MetadataKeyPath(["title"]),
                    value: .string("Hi"))),
            .deleteMetadata(
                DeleteMetadata(requestID: UUID(), conversationID: cid, keyPath: try MetadataKeyPath(["title"]))),
            .deleteConversation(DeleteConversation(requestID: UUID(), conversationID: cid, mode: .myDevices)),
            .markAllRead(MarkAllRead(requestID: UUID(), conversationID: cid, upTo: at)),
            .sendMessage(
                SendMessage(
                    messageID: mid, conversationID: cid, parts: [try MessagePart(text: "hello")],
                    push: PushConfiguration(alert: "hi"), mentions: [bob])),
            .markRead(MarkRead(requestID: UUID(), conversationID: cid, messageID: mid)),
            .deleteMessage(
                DeleteMessage(requestID: UUID(), conversationID: cid, messageID: mid, mode: .allParticipants)),
            .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: cid, upTo: at)),
            .react(React(requestID: UUID(), conversationID: cid, messageID: mid, key: "+1", op: .add)),
            .updateMessageParts(
                UpdateMessageParts(
                    requestID: UUID(), conversationID: cid, messageID: mid, parts: [try MessagePart(text: "edited")])),
            // A reply goes through the outbox as a send (SEND_REPLY's frame under kind message.send).
            .sendMessage(
                SendMessage(
                    messageID: MessageID.random(), conversationID: cid, parts: [try MessagePart(text: "a reply")],
                    replyTo: mid)),
            .setNotificationLevel(
                SetNotificationLevel(
                    requestID: UUID(), conversationID: cid, level: .mentions,
                    until: Timestamp(millisecondsSince1970: 1_767_229_200_000))),
        ]
    }

    @Test func outboxEntriesRoundTripEveryCommandUnderItsClientChosenID() throws {
        let frames = try commands()
        #expect(Set(frames.compactMap(OutboxEncoder.kind(of:))) == Set(OutboxCommandKind.allCases))
        for frame in frames {
            let entry = try OutboxEncoder.entry(for: frame)
            #expect(entry.id == frame.commandID)
            #expect(entry.kind == OutboxEncoder.kind(of: frame)?.rawValue)
            #expect(try OutboxEncoder.frame(for: entry) == frame)
        }
        // Creations use the object's own id (SPEC §7).
        #expect(try OutboxEncoder.entry(for: frames[0]).id == cid.uuid)
        #expect(try OutboxEncoder.entry(for: frames[7]).id == mid.uuid)
        #expect(try OutboxEncoder.entry(for: frames[7]).objectID == mid.uuid)
    }

    @Test func outboxEncoderRefusesNonCommandsAndCorruptEntries() throws {
        #expect(throws: ClientError.self) { try OutboxEncoder.entry(for: .ping(Ping(payload: 1))) }
        #expect(throws: ClientError.self) {
            try OutboxEncoder.entry(for: .typing(Typing(conversationID: cid, state: .started)))
        }
        var entry = try OutboxEncoder.entry(for: try commands()[7])
        entry.kind = OutboxCommandKind.markRead.rawValue
        #expect { try OutboxEncoder.frame(for: entry) } throws: { ($0 as? ClientError)?.code == .corruptRecord }
        entry = try OutboxEncoder.entry(for: try commands()[7])
        entry.payload.removeLast()
        #expect { try OutboxEncoder.frame(for: entry) } throws: { ($0 as? ClientError)?.code == .corruptRecord }
        entry = try OutboxEncoder.entry(for: try commands()[7])
        entry.id = UUID()
        #expect { try OutboxEncoder.frame(for: entry) } throws: { ($0 as? ClientError)?.code == .corruptRecord }
    }

    @Test func outboxEncoderChecksWireLimitsWithTheWireCode() throws {
        let users = Set((0..<251).map { try! UserID("u\($0)") })
        #expect {
            try OutboxEncoder.entry(
                for: .addParticipants(ParticipantsUpdate(requestID: UUID(), conversationID: cid, users: users)))
        } throws: {
            ($0 as? ClientError)?.code == .tooManyParticipants
        }
    }

    @Test func decoderSkipsEntriesAtOrBelowTheCursorAndKeepsSeqZeroOutOfIt() throws {
        let conv = try conversation([alice, bob])
        let fromBob = try remoteMessage(in: conv.id, from: bob, at: 20)
        let mine = try remoteMessage(in: conv.id, from: alice, at: 21)
        let entries = [
            Change(seq: 3, event: .conversationCreated(conv)),
            Change(seq: 5, event: .messageCreated(fromBob)),
            Change(seq: 0, event: .typing(TypingChanged(conversationID: conv.id, user: bob, state: .started))),
            Change(seq: 0, event: .typing(TypingChanged(conversationID: conv.id, user: alice, state: .started))),
            Change(seq: 5, event: .messageCreated(fromBob)),
            Change(seq: 6, event: .messageCreated(mine)),
            Change(
                seq: 7,
                event: .messageStatusChanged(
                    MessageStatusChanged(conversationID: conv.id, messageID: mine.id, user: bob, status: .delivered))),
        ]
        let d = ChangeDecoder.decode(entries, after: 3, localUser: alice, receivedAt: received)
        #expect(d.cursor == 7)
        #expect(d.duplicatesSkipped == 2)
        // Each feed message is counted after it is stored (SPEC §6.4); another user's status is not a read of ours.
        #expect(
            d.changes == [
                .message(fromBob, receivedAt: received), .messageCounted(conv.id, fromBob.id),
                .message(mine, receivedAt: received),
                .messageCounted(conv.id, mine.id), .recipientStatus(mine.id, user: bob, status: .delivered),
            ])
        #expect(d.typing == [TypingChanged(conversationID: conv.id, user: bob, state: .started)])
        #expect(d.receivedFromOthers == [fromBob])
        // The local user's read of a message from the feed is counted before it applies; history
        // (seq 0) and snapshots are neither counted nor reads.
        let read = MessageStatusChanged(conversationID: conv.id, messageID: fromBob.id, user: alice, status: .read)
        let counted = ChangeDecoder.decode(
            [
                Change(seq: 8, event: .messageStatusChanged(read)), Change(seq: 0, event: .messageCreated(fromBob)),
                Change(seq: 0, event: .conversationCreated(conv)),
            ], after: 7, localUser: alice, receivedAt: received)
        #expect(
            counted.changes == [
                .readCounted(conv.id, fromBob.id), .recipientStatus(fromBob.id, user: alice, status: .read),
                .message(fromBob, receivedAt: received), .reactionsReplaced(fromBob.id, [:]), .conversation(conv),
            ])
        #expect(counted.unsequencedConversations == [conv.id])
        // Only seq-0 entries: no cursor.
        #expect(ChangeDecoder.decode([entries[2]], after: 9, localUser: alice, receivedAt: received).cursor == nil)
    }

    @Test func everyEventKindMapsToItsStoreChange() throws {
        let conv = try conversation([alice, bob])
        let path = try MetadataKeyPath(["a"])
        #expect(ChangeDecoder.remoteChange(.conversationCreated(conv), receivedAt: received) == .conversation(conv))
        #expect(
            ChangeDecoder.remoteChange(
                .participantsChanged(
                    ParticipantsChanged(conversationID: cid, added: [carol], removed: [bob], by: alice, at: at)),
                receivedAt: received) == .participants(cid, added: [carol], removed: [bob]))
        #expect(
            ChangeDecoder.remoteChange(
                .metadataChanged(MetadataChanged(conversationID: cid, keyPath: path, value: nil, by: alice, at: at)),
                receivedAt: received) == .metadata(cid, path: path, value: nil))
        #expect(
            ChangeDecoder.remoteChange(
                .conversationDeleted(ConversationDeleted(conversationID: cid, mode: .allParticipants, by: bob)),
                receivedAt: received) == .conversationDeleted(cid))
        let other = ConversationID.random()
        #expect(
            ChangeDecoder.remoteChange(
                .identifierChanged(IdentifierChanged(from: cid, to: other)), receivedAt: received)
                == .distinctMerge(from: cid, into: other))
        let m = try remoteMessage(in: cid, at: 3)
        #expect(
            ChangeDecoder.remoteChange(.messageCreated(m), receivedAt: received) == .message(m, receivedAt: received))
        #expect(
            ChangeDecoder.remoteChange(
                .messageStatusChanged(
                    MessageStatusChanged(conversationID: cid, messageID: m.id, user: bob, status: .read)),
                receivedAt: received) == .recipientStatus(m.id, user: bob, status: .read))
        #expect(
            ChangeDecoder.remoteChange(
                .conversationDeleted(
                    ConversationDeleted(conversationID: cid, mode: .allParticipants, below: at, by: bob)),
                receivedAt: received) == .messagesDeleted(cid, below: at))
        #expect(
            ChangeDecoder.remoteChange(
                .messageDeleted(MessageDeleted(conversationID: cid, messageID: mid, mode: .myDevices, by: alice)),
                receivedAt: received) == .messageDeleted(mid))
        #expect(
            ChangeDecoder.remoteChange(
                .conversationUpdated(
                    ConversationUpdated(
                        conversationID: cid, isDistinct: true, deliveryReceiptsEnabled: true, messageCount: 1,
                        unreadCount: 0)), receivedAt: received)
                == .counts(
                    cid, NodeCounts(messages: 1, unread: 0), isDistinct: true, deliveryReceiptsEnabled: true,
                    readReceiptsEnabled: true))
    }

    @Test func acksCompleteAndErrorsFailOrRetryByCode() {
        let id = UUID()
        let ack = Ack(requestID: id, position: at, timestamp: Timestamp(millisecondsSince1970: 9))
        #expect(ChangeDecoder.completion(.ack(ack)) == .acknowledged(id, ack))
        #expect(
            ChangeDecoder.completion(
                .error(ErrorFrame(requestID: id, code: .notAParticipant, reason: "no", isFatal: false)))
                == .failed(id, code: .notAParticipant, reason: "no", conversationID: nil))
        for code in [WireError.Code.overloaded, .quotaExceeded, .contentNotReady, .internalError, .shuttingDown] {
            #expect(
                ChangeDecoder.completion(
                    .error(
                        ErrorFrame(
                            requestID: id, code: code, reason: "later", isFatal: false, retryAfterMilliseconds: 250)))
                    == .retry(id, after: .milliseconds(250)))
        }
        #expect(
            ChangeDecoder.completion(.error(ErrorFrame(code: .internalError, reason: "stream", isFatal: true))) == nil)
        #expect(ChangeDecoder.completion(.ping(Ping(payload: 1))) == nil)
    }

    @Test func deliveryReceiptsGoOutOncePerConversationUpToTheHighestPosition() throws {
        let other = ConversationID.random()
        let ms = [
            try remoteMessage(in: cid, at: 5), try remoteMessage(in: other, at: 3), try remoteMessage(in: cid, at: 9),
            try remoteMessage(in: cid, at: 7),
        ]
        let receipts = ChangeDecoder.deliveryReceipts(for: ms)
        #expect(receipts.map(\.conversationID) == [cid, other])
        #expect(receipts.map(\.upTo) == [position(9), position(3)])
        #expect(Set(receipts.map(\.requestID)).count == 2)
    }

    @Test func backoffGrowsExponentiallyWithinItsJitterBoundsAndCap() throws {
        let policy = ReconnectPolicy(
            initialDelay: .milliseconds(500), multiplier: 2, maxDelay: .seconds(30), jitter: 0.5)
        var previous: Duration = .zero
        for attempt in 0..<40 {
            let base = policy.baseDelay(attempt: attempt)
            #expect(base >= previous)
            #expect(base <= .seconds(30))
            previous = base
            for r in [0.0, 0.25, 0.5, 0.999_999] {
                let d = policy.delay(attempt: attempt, random: r)
                #expect(d <= base)
                #expect(d >= base / 2)
            }
        }
        #expect(policy.baseDelay(attempt: 0) == .milliseconds(500))
        #expect(policy.baseDelay(attempt: 3) == .milliseconds(4_000))
        #expect(policy.baseDelay(attempt: 10) == .seconds(30))
        #expect(policy.baseDelay(attempt: Int.max) == .seconds(30))
        #expect(policy.delay(attempt: 2, random: 0) == .seconds(2))
        #expect(policy.delay(attempt: 2, random: 0.5) == .milliseconds(1_500))
        #expect(policy.delay(attempt: 2, random: .nan) == .seconds(2))
        // Settings out of range are refused.
        for bad in [
            ReconnectPolicy(initialDelay: .zero), ReconnectPolicy(multiplier: 0.5),
            ReconnectPolicy(maxDelay: .seconds(7_200)),
            ReconnectPolicy(jitter: 1.5), ReconnectPolicy(initialDelay: .seconds(90), maxDelay: .seconds(60)),
        ] {
            #expect { try bad.validate() } throws: { ($0 as? ClientError)?.code == .invalidSetting }
        }
    }

    @Test func typingSchedulerRefreshesStartedEvery2500msUntilPausedOrFinished() throws {
        var s = TypingScheduler()
        let t = { (ms: Int64) in Timestamp(millisecondsSince1970: ms) }
        #expect(try s.set(.started, in: cid, now: t(0)) == [Typing(conversationID: cid, state: .started)])
        #expect(try s.set(.started, in: cid, now: t(1_000)) == [])  // still fresh
        #expect(s.nextDeadline == t(2_500))
        #expect(s.due(now: t(2_499)) == [])
        #expect(s.due(now: t(2_500)) == [Typing(conversationID: cid, state: .started)])
        #expect(s.nextDeadline == t(5_000))
        #expect(try s.set(.paused, in: cid, now: t(3_000)) == [Typing(conversationID: cid, state: .paused)])
        #expect(s.nextDeadline == nil)
        #expect(s.due(now: t(10_000)) == [])
        #expect(try s.set(.paused, in: cid, now: t(10_001)) == [])  // already paused
        #expect(try s.set(.started, in: cid, now: t(10_002)) == [Typing(conversationID: cid, state: .started)])
        #expect(try s.set(.finished, in: cid, now: t(10_003)) == [Typing(conversationID: cid, state: .finished)])
        #expect(try s.set(.finished, in: cid, now: t(10_004)) == [])
        #expect(s.state(in: cid) == nil)
        // At most 64 conversations at once.
        var many = TypingScheduler()
        for _ in 0..<TypingScheduler.maxConversations { _ = try many.set(.started, in: .random(), now: t(0)) }
        #expect { try many.set(.started, in: .random(), now: t(0)) } throws: {
            ($0 as? ClientError)?.code == .invalidArgument
        }
    }
}
