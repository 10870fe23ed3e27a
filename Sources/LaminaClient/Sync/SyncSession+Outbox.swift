import Foundation
import LaminaModel
import LaminaWire
import NIOCore

/// The outbox side of a session (SPEC §7): commands go out in outbox order once live,
/// pipelined: a conversation's creation does not hold back the commands behind it (the node
/// applies those naming its id to the conversation it resolved to, SPEC §6.1); commands
/// not sent yet follow a resolution to the survivor. ACKs and ERRORs complete the entries.
extension SyncSession {
    func complete(_ completion: OutboxCompletion) async throws {
        if case .failed(let id, .notFound, _, _) = completion, let entry = pending[command: id],
            try await followsPendingCreation(entry)
        {
            // The creation it was pipelined behind was not applied (it waits for a retry):
            // this command is retried after it, instead of failing.
            return try await complete(.retry(id, after: nil))
        }
        switch completion {
        case .acknowledged(let id, let ack):
            let entry = pending[command: id]
            pending[command: id] = nil
            // What the ACK changes commits with the entry's removal: a sent message is never
            // seen sent while its command still waits in the outbox.
            switch entry.flatMap({ OutboxCommandKind(rawValue: $0.kind) }) {
            case .sendMessage:
                // One trip to the store: the message read, updated and its entry removed.
                try await store.acknowledgeSentMessageAsync(MessageID(uuid: id), receivedAt: environment.now()) {
                    stored in
                    guard let position = ack.position else { return nil }
                    var m = stored
                    m.position = position
                    m.sentAt = ack.timestamp ?? m.sentAt
                    // Accepted by the node: every participant's status is at least sent.
                    for (user, status) in m.recipientStatus { m.recipientStatus[user] = max(status, .sent) }
                    return m
                }
            case .createConversation:
                var changes: [RemoteChange] = []
                if let to = ack.conversationID, to.uuid != id {
                    changes = [.distinctMerge(from: ConversationID(uuid: id), into: to)]
                } else if let local = try await store.conversationAsync(ConversationID(uuid: id)), !local.isSynced {
                    changes = [.conversation(local.conversation)]  // the node has it now
                }
                try await applyTolerant(changes, cursor: nil, acknowledged: id)
            default:
                try await applyTolerant([], cursor: nil, acknowledged: id)
            }
        case .failed(let id, let code, let reason, let conversationID):
            let entry = pending[command: id]
            pending[command: id] = nil
            if code == .existingDistinctConversation, let to = conversationID,
                entry?.kind == OutboxCommandKind.createConversation.rawValue
            {
                try await applyTolerant([.distinctMerge(from: ConversationID(uuid: id), into: to)], cursor: nil)
            }
            let now = environment.now()
            if try await store.markFailedAsync(id, code: code.wireValue, reason: reason, at: now) {
                onEvent(
                    .commandFailed(
                        OutboxFailure(
                            id: id, kind: entry?.kind ?? "", objectID: entry?.objectID, code: code.wireValue,
                            reason: reason, failedAt: now)))
            }
        case .retry(let id, let after):
            pending[command: id] = nil
            try await store.requeueAsync(id)
            // One retry pending at a time: the flush it runs sends every requeued entry.
            guard retryTask == nil else { return }
            let sleep = environment.sleep
            retryTask = Task { [weak self] in
                try? await sleep(after ?? Self.defaultRetryDelay)
                guard !Task.isCancelled else { return }
                await self?.retryFlush()
            }
        }
    }

    /// The pending retry's flush: the next transient ERROR may schedule another.
    func retryFlush() async {
        retryTask = nil
        try? await flushOutbox()
    }

    /// Sends every pending outbox entry in outbox order (only when live). Concurrent calls
    /// coalesce: one flush runs, and runs again if more was asked while it ran.
    public func flush() async {
        do { try await flushOutbox() } catch {}
    }

    func flushOutbox() async throws {
        guard state == .live else { return }
        if flushing {
            flushAgain = true
            return
        }
        flushing = true
        defer { flushing = false }
        repeat {
            flushAgain = false
            // One trip to the store: the entries, marked in flight, and where each entry's
            // conversation is now (after distinct merges).
            let batch = try await store.dequeueOutboxForSendAsync(limit: Self.flushBatch, gate: sendGate)
            for send in batch {
                let entry = send.entry
                guard entry.payload.count - FrameHeader.size <= maxFrameSize else {
                    try await refuseOversized(entry)
                    continue
                }
                // The stored bytes go out as they are (encoded once, when queued); only a
                // command whose conversation was merged away is decoded and addressed anew.
                let bytes: ByteBuffer
                var redirected: Frame?
                do {
                    bytes = try OutboxEncoder.bytes(of: entry)
                    if let to = send.redirect {
                        redirected = OutboxRedirect.redirect(try OutboxEncoder.frame(for: entry), to: to)
                    }
                } catch {
                    try await store.markFailedAsync(
                        entry.id, code: WireError.Code.invalidArgument.wireValue,
                        reason: "the outbox entry does not hold its command", at: environment.now())
                    continue
                }
                pending[command: entry.id] = entry
                if let redirected { try await channel.send(redirected) } else { try await channel.send(encoded: bytes) }
            }
            if batch.count == Self.flushBatch { flushAgain = true }
        } while flushAgain && state == .live
    }

    /// Whether `entry` addresses a conversation whose creation is still in the outbox (sent
    /// and answered with a transient error, so requeued): its `not-found` is not final.
    private func followsPendingCreation(_ entry: OutboxEntry) async throws -> Bool {
        guard let target = entry.conversationID else { return false }
        return try await store.outboxContainsAsync(target)
    }

    /// A command larger than the node's WELCOME `maxFrameSize` would cost the stream (SPEC
    /// §2.3): it fails here, with the code the node would give, and the rest goes on.
    private func refuseOversized(_ entry: OutboxEntry) async throws {
        let now = environment.now()
        let code = WireError.Code.frameTooLarge.wireValue
        let reason =
            "the command is \(entry.payload.count - FrameHeader.size) bytes; the node accepts frames of at most \(maxFrameSize)"
        if try await store.markFailedAsync(entry.id, code: code, reason: reason, at: now) {
            onEvent(
                .commandFailed(
                    OutboxFailure(
                        id: entry.id, kind: entry.kind, objectID: entry.objectID, code: code, reason: reason,
                        failedAt: now)))
        }
    }
}
