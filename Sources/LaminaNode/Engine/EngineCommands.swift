import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers
import NIOCore

/// A distinct conversation with these participants exists with other metadata (SPEC §6.1).
struct DistinctConflict: Error {
    var existing: ConversationID
}

/// What one command transaction produced.
enum CommandResult: Sendable {
    case applied(Ack, [FeedChange])
    /// The command was applied before (a retry): its first ACK, nothing new.
    case replayed(Ack)
    /// The command is answered with this error, but what it wrote commits (an alias).
    case refused(DistinctConflict)
}

extension NodeEngine {
    /// Runs one authenticated command of `session`: validate, authorize, decide, commit (with
    /// its feed entries and idempotency record), ACK after the commit, fan out.
    ///
    /// Storage commands are pipelined: the command is queued for the next group commit and
    /// this returns without waiting for it, so the session's next command can join the same
    /// group. The writer applies queued commands in order, so a command sees the effects of
    /// the session's earlier ones, and completes them in order, so ACKs leave in order. At
    /// most `NodeSession.maxCommandsInFlight` wait per session (this suspends beyond that).
    func execute(_ frame: Frame, in session: NodeSession, as auth: NodeSession.Auth) async {
        do {
            switch frame {
            case .typing(let typing):
                return await relayTyping(typing, from: session, as: auth)
            case .sync(let request):
                return try await sync(request, in: session, as: auth)
            case .fetchHistory(let request):
                return try await fetchHistory(request, in: session, as: auth)
            case .searchMessages(let request):
                return try await searchMessages(request, in: session, as: auth)
            default:
                break
            }
        } catch {
            return Self.reply(error, to: session, requestID: frame.commandID)
        }
        await session.acquireCommandSlot()
        submit(frame, in: session, as: auth)
    }

    /// Whether `frame` is a command that commits through storage: the commands of SPEC
    /// §6.1 and §6.2 but TYPING. (Session frames with a request id, NONCE_REQUEST,
    /// AUTHENTICATE and RESUME_SESSION, are the session's own: SPEC §5.7.)
    static func isStorageCommand(_ frame: Frame) -> Bool {
        switch frame {
        case .createConversation, .addParticipants, .removeParticipants, .setMetadata, .deleteMetadata,
            .deleteConversation, .markAllRead,
            .sendMessage, .markRead, .deleteMessage, .deliveryReceipt, .updateMessageParts, .react:
            true
        default: false
        }
    }

    /// Queues a storage command of `session` for the next group commit; the caller holds one
    /// of the session's command slots, which the command's completion gives back. Never waits
    /// for another command; with `mayCommitInline` (the caller is the event loop that read
    /// it) the command may be committed and answered on the caller's thread before this
    /// returns (`NodeStore.submit`).
    func submit(_ frame: Frame, in session: NodeSession, as auth: NodeSession.Auth, mayCommitInline: Bool = false) {
        let requestID = frame.commandID
        do {
            guard let id = requestID else { throw WireError(.unexpectedFrame, "\(frame.type.name) is not a command") }
            let key = IdempotencyKey(user: auth.user, id: id)
            let encoded = try frame.encoded()
            if let wait = commandBudget.take([1, Double(encoded.readableBytes)], for: auth.user) {
                session.releaseCommandSlot()
                var refusal = ErrorFrame(
                    WireError(
                        .overloaded,
                        "over the user's command budget (\(Int(configuration.commandBudget.commandsPerSecond)) commands, \(Int(configuration.commandBudget.bytesPerSecond)) bytes a second)"
                    ),
                    requestID: requestID)
                refusal.retryAfterMilliseconds = UInt32(
                    clamping: max(
                        1, wait.components.seconds * 1_000 + wait.components.attoseconds / 1_000_000_000_000_000))
                session.send(.error(refusal))
                return
            }
            let digest = try SHA256Hasher.hash(encoded)
            let user = auth.user
            let now = Timestamp.now()
            try store.submit(
                { [self] tx -> CommandResult in
                    try command(frame, as: user, key: key, digest: digest, now: now, in: tx)
                },
                conversations: frame.writtenConversation.map { [$0] } ?? [], mayCommitInline: mayCommitInline,
                completion: { [self] result in
                    // The answer goes out before the slot is given back: a read waiting for the
                    // session's commands to drain is answered after this one (SPEC §5.7).
                    defer { session.releaseCommandSlot() }
                    switch result {
                    case .success(.applied(let ack, let changes)):
                        session.send(.ack(ack))
                        publish(changes)
                    case .success(.replayed(let ack)):
                        session.send(.ack(ack))
                    case .success(.refused(let error)):
                        Self.reply(error, to: session, requestID: requestID)
                    case .failure(let error):
                        Self.reply(error, to: session, requestID: requestID)
                    }
                })
        } catch {
            session.releaseCommandSlot()
            Self.reply(error, to: session, requestID: requestID)
        }
    }

    /// One command inside the writer's transaction: answered from its record when it is a
    /// retry, else applied by ``CommandContext`` with its idempotency record; `after` runs in
    /// the same transaction once the command applied (what the Server API adds).
    func command(
        _ frame: Frame, as user: UserID, key: IdempotencyKey, digest: [UInt8], now: Timestamp,
        in tx: StorageTransaction, pushOverrides: [UserID: PushConfiguration] = [:], contentOwner: UserID? = nil,
        patchOperation: Int? = nil, after: ((inout CommandContext, Ack) throws -> Void)? = nil
    ) throws -> CommandResult {
        // A send is checked for a retry only when it fails (its id is taken, or the
        // conversation changed since): a new message costs no lookup.
        if case .sendMessage = frame {
        } else if let replayed = try Self.replay(frame, key: key, digest: digest, tx.read) {
            return .replayed(replayed)
        }
        var context = CommandContext(tx: tx, user: user, engine: self, now: now)
        context.pushOverrides = pushOverrides
        context.contentOwner = contentOwner
        if let patchOperation {
            // A PATCH's commands: their webhook changes wait for the whole PATCH (`after` flushes).
            context.pendingConversationChanges = []
            context.patchOperation = patchOperation
        }
        let ack: Ack
        do {
            ack = try context.apply(frame, digest: digest)
        } catch {
            // A failed command's writes are rolled back with its savepoint; a send that
            // failed before writing anything may be a retry.
            if case .sendMessage = frame, !context.startedWriting,
                let replayed = try Self.replay(frame, key: key, digest: digest, tx.read)
            {
                return .replayed(replayed)
            }
            throw error
        }
        // Refused after recording what must stay (an alias of the existing conversation).
        if let refusal = context.refusal { return .refused(refusal) }
        try after?(&context, ack)
        if case .sendMessage = frame {
        } else {
            try tx.recordResult(digest + Array(try Frame.ack(ack).encoded().readableBytesView), for: key, at: now)
        }
        return .applied(ack, context.changes)
    }

    private static func reply(_ error: any Error, to session: NodeSession, requestID: UUID?) {
        if let conflict = error as? DistinctConflict {
            session.reply(
                WireError(
                    .existingDistinctConversation,
                    "a distinct conversation with these participants exists with other metadata"),
                requestID: requestID, conversationID: conflict.existing)
        } else {
            session.reply(EngineErrors.wire(error), requestID: requestID)
        }
    }

    /// The first ACK of a command applied before, if this is a retry of it; `id-in-use` when
    /// its id was used for a different command. A sent message is its own record (its row
    /// keeps the command's digest); other commands have an idempotency record.
    static func replay(_ frame: Frame, key: IdempotencyKey, digest: [UInt8], _ read: StorageReader) throws -> Ack? {
        if case .sendMessage(let send) = frame, let record = try read.sendRecord(send.messageID),
            record.requestDigest != nil
        {
            guard record.sender == key.user, record.requestDigest == digest else {
                throw WireError(.idInUse, "id \(key.id.uuidString.lowercased()) was used for a different command")
            }
            return Ack(
                requestID: send.messageID.uuid, conversationID: record.conversation, position: record.position,
                timestamp: record.sentAt)
        }
        guard let record = try read.recordedResult(for: key) else { return nil }
        guard record.count > 32, Array(record.prefix(32)) == digest else {
            throw WireError(.idInUse, "id \(key.id.uuidString.lowercased()) was used for a different command")
        }
        guard case .ack(let ack) = try Frame.decode(exactly: ByteBuffer(bytes: record.dropFirst(32))) else {
            throw WireError(.internalError, "the recorded result of \(key.id) is not an ACK")
        }
        return ack
    }

    // MARK: Sync

    /// SYNC: stores the device's cursor, sends every feed entry after it in ascending seq
    /// (batched when the feature is on), then ACK with the cursor reached; the session is live
    /// from here on. A cursor below the retained feed, or cursor 0 with the snapshots feature,
    /// gets a snapshot instead (SPEC §6.3): conversations, latest messages, counts.
    private func sync(_ request: SyncRequest, in session: NodeSession, as auth: NodeSession.Auth) async throws {
        let user = auth.user
        let device = auth.device
        let head = try await store.read { r in try r.feedHead(of: user) }
        guard request.cursor <= head else {
            throw WireError(.invalidArgument, "cursor \(request.cursor) is beyond the feed head \(head)")
        }
        if request.cursor > 0 {
            try await store.write { tx in
                _ = try tx.advanceCursor(of: device, user: user, to: request.cursor, at: .now())
            }
        }
        let features = session.state.withLockedValue { s -> FeatureSet in
            s.live = true
            return s.features
        }
        let snapshots = features.contains(.snapshots)
        var cursor = request.cursor
        let after = cursor
        // A snapshot for a new device that asks for one (cursor 0 with the snapshots feature),
        // and for a cursor below what the node keeps of the feed (pruned), whatever it asked.
        var snapshot = snapshots && cursor == 0 && head > 0
        if !snapshot, head > cursor {
            let oldest = try await store.read { r in try r.feed(of: user, after: after, limit: 1) }.first
            snapshot = oldest.map { $0.seq > after + 1 } ?? true
        }
        if snapshot {
            // Conversations, counts and the head from one read: the feed after the head holds
            // exactly what the snapshot does not.
            guard let lease = await session.answerLease(Self.historyPageBytes) else { return }
            defer { lease.release() }
            let withReactions = features.contains(.reactions)
            let (taken, reactions) = try await store.read { r in
                var taken = try r.snapshot(of: user)
                // Its latest messages as history sends them: roots with their thread summaries (§6.2).
                try taken.summarizeThreads(for: features, r)
                // The reactions on the latest messages, in the same read (SPEC §6.9).
                let reactions =
                    withReactions
                    ? try Self.reactionChanges(
                        r, on: Self.createdMessages(taken.changes()), hiding: Set(taken.blocked)) : []
                return (taken, reactions)
            }
            guard await session.sendPaced(FeedCoding.frames(taken.changes() + reactions, for: features)) else { return }
            await session.settle(lease)
            cursor = taken.head
        } else {
            cursor = try await sendFeed(of: user, after: cursor, to: session, features: features)
        }
        // Live entries queued meanwhile wait behind this SYNC in the session's inbox; those
        // at or below the cursor are dropped there, the rest follow in order.
        session.state.withLockedValue { $0.sentThrough = max($0.sentThrough, cursor) }
        session.send(.ack(Ack(requestID: request.requestID, cursor: cursor)))
    }

    /// Sends `user`'s feed entries after `cursor` to `session` in seq order, in reads of
    /// ``feedPage`` made as the client reads (paced); returns the last seq sent (`cursor` when
    /// there was none). Each page holds a lease of the answer budget from before its read. The
    /// next page is read while one is sent when the budget has room for it at once
    /// (``AnswerBudget/tryAcquire(user:bytes:)``), and a sent page's lease is given back once
    /// the next page is queued behind it (what is left of it then is within the paced queue's
    /// bound); without that room, a page's lease is given back when it drained, and the next
    /// one is read under a lease waited for.
    func sendFeed(of user: UserID, after cursor: UInt64, to session: NodeSession, features: FeatureSet) async throws
        -> UInt64
    {
        var cursor = cursor
        guard session.isOpen, let first = await session.answerLease(Self.historyPageBytes) else { return cursor }
        var lease = first
        // The page sent before, until the one after it is queued.
        var sent: AnswerBudget.Lease?
        var ahead: (read: Task<[FeedEntry], any Error>, lease: AnswerBudget.Lease)?
        defer {
            lease.release()
            sent?.release()
            ahead?.read.cancel()
            ahead?.lease.release()
        }
        let encoding = FeedCoding.sendsStoredMessages(features)
        var entries = try await readFeedPage(of: user, after: cursor, encodingMessages: encoding)
        while session.isOpen, let last = entries.last {
            let full = entries.count == Self.feedPage
            var bytes = 0
            var changes: [Change] = []
            changes.reserveCapacity(entries.count)
            for entry in entries {
                bytes +=
                    64 + entry.payload.count + (entry.createdMessage.map { Self.estimatedBytes($0) } ?? 0)
                    + (entry.createdEncoding?.estimatedSize ?? 0)
                changes.append(try FeedCoding.decode(entry))
            }
            entries = []
            lease.resize(to: bytes)
            if full, let next = answers.tryAcquire(user: user, bytes: bytes) {
                let after = last.seq
                ahead = (
                    Task { try await self.readFeedPage(of: user, after: after, encodingMessages: encoding) }, next
                )
            }
            let queued = await session.sendPaced(FeedCoding.frames(changes, for: features))
            // The page is encoded in the stream's queue: its entries go before the drain wait.
            changes = []
            sent?.release()
            sent = nil
            guard queued else { break }
            cursor = last.seq
            guard full else {
                await session.settle(lease)
                break
            }
            if let pending = ahead {
                ahead = nil
                sent = lease
                lease = pending.lease
                entries = try await pending.read.value
            } else {
                await session.settle(lease)
                guard let next = await session.answerLease(Self.historyPageBytes) else { break }
                lease = next
                entries = try await readFeedPage(of: user, after: cursor, encodingMessages: encoding)
            }
        }
        if let sent {
            // The last page's frames are queued behind it: both drained together.
            await session.settle(sent)
        }
        return cursor
    }

    /// Entries read from a feed at once by ``sendFeed(of:after:to:features:)``.
    static let feedPage = 1024

    private func readFeedPage(of user: UserID, after: UInt64, encodingMessages: Bool) async throws -> [FeedEntry] {
        try await store.read { r in
            try r.feed(of: user, after: after, limit: Self.feedPage, encodingMessages: encodingMessages)
        }
    }

    // MARK: History

    /// FETCH_HISTORY: the messages the user may see (a removed participant: those before the
    /// removal), as `message-created` changes with seq 0, then ACK. Sent as the client reads
    /// (paced), every policy a page at a time forward from its start, so a fetch holds one
    /// page of messages, not the whole answer: the complete, unread and page-after policies
    /// start where they say; `before` and last-n first find their start by walking the position
    /// index backwards a page at a time (``backwardStart(_:_:_:_:_:max:)``).
    private func fetchHistory(_ request: FetchHistory, in session: NodeSession, as auth: NodeSession.Auth) async throws
    {
        if case .thread(let root, let after, let count) = request.policy {
            return try await fetchThread(root, after: after, count: count, request, in: session, as: auth)
        }
        let user = auth.user
        let named = request.conversationID
        var total = configuration.maxHistoryMessages
        let forward: Bool
        switch request.policy {
        case .complete, .unreadOnly: forward = request.before == nil
        case .lastN: forward = false
        case .pageAfter(_, let count):
            forward = true
            total = Int(count)  // 1...FetchHistory.maxPageCount, checked by the decoder
        case .thread: return  // answered above
        }
        // The first page is small; later ones hold about `historyPageBytes` (the size of the
        // messages read so far decides how many), so a fetch of large messages holds a
        // megabyte or so at a time, not 256 of them.
        let most = total
        let page = Swift.min(Self.firstHistoryPage, most)
        // Each page read holds a lease of the node's answer budget until its frames left the
        // stream's paced queue.
        guard var lease = await session.answerLease(Self.historyPageBytes) else { return }
        defer { lease.release() }
        // Destructured, so no binding keeps the first page alive past its sending.
        var messages: [Message]
        let id: ConversationID
        let max: Int
        let features = session.state.withLockedValue { $0.features }
        (messages, id, max) = try await store.read { r -> (messages: [Message], id: ConversationID, max: Int) in
            var found = try r.conversation(named)
            if found?.isLive != true, let target = try r.resolvedConversation(named) {
                found = try r.conversation(target)
            }
            guard let conversation = found, conversation.isLive else {
                throw WireError(.notFound, "no conversation \(named)")
            }
            let id = conversation.conversation.id
            guard try r.participantState(of: user, in: id) != nil else {
                throw WireError(.notAParticipant, "\(user) is not a participant of \(id)")
            }
            guard forward else {
                // In the same read: the start the backward walk finds and the first page after it.
                let (start, count) = try Self.backwardStart(r, id, user, request.policy, request.before, max: most)
                guard count > 0 else { return ([], id, 0) }
                let first = try r.history(of: id, for: user, .complete(after: start, limit: Swift.min(page, count)))
                return (try Threads.summarized(first, for: features, r), id, count)
            }
            var start: MessagePosition? = nil
            switch request.policy {
            case .unreadOnly: start = try Self.unreadStart(r, id, user)
            case .pageAfter(let after, _): start = after
            case .complete, .lastN, .thread: break
            }
            let first = try r.history(of: id, for: user, .complete(after: start, limit: page))
            return (try Threads.summarized(first, for: features, r), id, most)
        }
        lease.resize(to: Self.estimatedBytes(messages))
        var requested = Swift.min(page, max)
        var sent = 0
        while true {
            var ended = false
            if let before = request.before,
                let cut = messages.firstIndex(where: { ($0.position.map { $0 >= before }) ?? true })
            {
                messages.removeSubrange(cut...)
                ended = true
            }
            let count = messages.count
            let last = messages.last?.position
            let nextPage = Self.nextHistoryPage(after: messages)
            // The page's reactions follow its messages (SPEC §6.9).
            // Not those of users the reader blocks (§6.2 block lists), as the live feed.
            let sentPage = messages
            let hidden = blockLists.blocked(by: user)
            let reactions =
                features.contains(.reactions) && !sentPage.isEmpty
                ? try await store.read { r in try Self.reactionChanges(r, on: sentPage, hiding: hidden) } : []
            let queued = await session.sendPaced(
                FeedCoding.frames(
                    messages.map { Change(seq: 0, event: .messageCreated($0)) } + reactions, for: features))
            // Once encoded into the stream's queue the page's messages are not needed: they go
            // before the wait for the queue to drain and the next read (else a page's messages
            // and its encoding, and then two pages, would be held under one page's lease).
            messages = []
            guard queued else { return }
            sent += count
            guard !ended, count == requested, sent < max, let after = last else { break }
            let limit = Swift.min(nextPage, max - sent)
            requested = limit
            await session.settle(lease)
            guard let next = await session.answerLease(Self.historyPageBytes) else { return }
            lease = next
            messages = try await store.read { r in
                try Threads.summarized(
                    try r.history(of: id, for: user, .complete(after: after, limit: limit)), for: features, r)
            }
            lease.resize(to: Self.estimatedBytes(messages))
            if messages.isEmpty { break }
        }
        await session.settle(lease)
        session.send(.ack(Ack(requestID: request.requestID, conversationID: id)))
    }

    /// The most messages read from the store at a time for a paged FETCH_HISTORY.
    static let historyPageSize = 256
    /// About the bytes of messages a page of a paged FETCH_HISTORY holds (8 fetches of a
    /// history of 33 KB messages held 510 MiB at their peak with pages of 256 messages).
    static let historyPageBytes = 1 << 20
    /// The first page's messages (their size is not known yet).
    static let firstHistoryPage = 32

    /// How many messages the next page reads: about ``historyPageBytes`` at the average size
    /// of the page just sent, 1...``historyPageSize``.
    static func nextHistoryPage(after page: [Message]) -> Int {
        guard !page.isEmpty else { return historyPageSize }
        let bytes = estimatedBytes(page)
        return Swift.max(1, Swift.min(historyPageSize, historyPageBytes / Swift.max(1, bytes / page.count)))
    }

    /// About the bytes `messages` take in memory and on the wire.
    static func estimatedBytes(_ messages: [Message]) -> Int {
        messages.reduce(0) { total, message in total + estimatedBytes(message) }
    }

    static func estimatedBytes(_ message: Message) -> Int {
        message.parts.reduce(128) { sum, part in
            if case .inline(let content) = part.content { return sum + content.count + 64 }
            return sum + 128
        }
    }

    /// Where an unread-only history starts (exclusive): after the user's read marker and the
    /// messages right behind it that the history itself reports read for the user (their own,
    /// first of all), so the answer starts at the first unread message (SPEC §6.3).
    static func unreadStart(_ r: StorageReader, _ id: ConversationID, _ user: UserID) throws -> MessagePosition? {
        var start = try r.readUpTo(conversation: id, user: user)
        let page = 32
        while true {
            let messages = try r.history(of: id, for: user, .complete(after: start, limit: page))
            for message in messages {
                guard message.recipientStatus[user] == .read, let position = message.position else { return start }
                start = position
            }
            if messages.count < page { return start }
        }
    }

    /// Where an answer read backwards starts: last-n (the newest `count`, at most `max`), or
    /// with `before` the newest `max` (last-n: `count`) before it, after the read marker for
    /// unread-only. Walks the position index backwards a page at a time from the newest
    /// (sized by bytes as forward pages are), keeping only each page's oldest position, so it
    /// holds one page, not the answer; returns the position the answer's ascending pages start
    /// after (nil: from the first message) and how many messages it holds. The answer's
    /// messages are read twice (once here, once to send them): the cost of sending in pages.
    static func backwardStart(
        _ r: StorageReader, _ id: ConversationID, _ user: UserID, _ policy: LaminaWire.HistoryPolicy,
        _ before: MessagePosition?, max: Int
    ) throws -> (after: MessagePosition?, count: Int) {
        var keep = max
        if case .lastN(let n) = policy {
            guard n >= 1 else { throw WireError(.invalidArgument, "last-n needs a count of at least 1") }
            keep = Swift.min(Int(n), max)
        }
        var floor: MessagePosition? = nil
        if before != nil {
            switch policy {
            case .unreadOnly: floor = try Self.unreadStart(r, id, user)
            case .pageAfter(let start, _): floor = start
            case .complete, .lastN, .thread: break
            }
        }
        /// The newest `count` before `upper` (after the floor); the newest of all without one
        /// (last-n without `before`: the only answer read backwards that has no `before`).
        func newest(before upper: MessagePosition?, count: Int) throws -> [Message] {
            guard let upper else { return try r.history(of: id, for: user, .last(count)) }
            return try r.history(of: id, for: user, .lastBefore(upper, after: floor, count: count))
        }
        var upper = before
        var count = 0
        var size = firstHistoryPage
        var oldest: MessagePosition? = nil
        while count < keep {
            let want = Swift.min(size, keep - count)
            let messages = try newest(before: upper, count: want)
            count += messages.count
            guard let first = messages.first?.position else { return (floor, count) }
            if messages.count < want { return (floor, count) }  // none older: from the floor
            oldest = first
            upper = first
            size = nextHistoryPage(after: messages)
        }
        guard let oldest else { return (floor, 0) }
        // Exclusive: the newest message before the oldest one kept (the floor when none).
        return (try newest(before: oldest, count: 1).first?.position ?? floor, count)
    }
}
