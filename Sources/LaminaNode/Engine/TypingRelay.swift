import LaminaModel
import LaminaWire
import NIOConcurrencyHelpers

/// Ends the typing indicators not refreshed in time (SPEC §6.1): one task per engine sleeps
/// until the earliest deadline and hands the indicators that passed it to `relayFinished`.
final class TypingExpiry: Sendable {
    typealias Key = TypingTimeouts<ContinuousClock.Instant>.Key

    private let timeouts = NIOLockedValueBox(TypingTimeouts<ContinuousClock.Instant>())
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)

    init() {
        (wakes, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Starts the timer. `relayFinished` gets the indicators that ended, in deadline order.
    func start(relayFinished: @escaping @Sendable ([Key]) async -> Void) {
        let runner = Task { [timeouts, wakes] in
            var signals = wakes.makeAsyncIterator()
            while !Task.isCancelled {
                if let deadline = timeouts.withLockedValue({ $0.nextDeadline }) {
                    do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
                    let due = timeouts.withLockedValue { $0.expire(at: .now) }
                    if !due.isEmpty { await relayFinished(due) }
                } else if await signals.next() == nil {
                    return
                }
            }
        }
        task.withLockedValue { $0 = runner }
    }

    /// Records an indicator received now; false when it must not be relayed (the table is full).
    func record(_ state: TypingState, of user: UserID, in conversation: ConversationID) -> Bool {
        let (accepted, wasIdle) = timeouts.withLockedValue { t in
            let idle = t.nextDeadline == nil
            return (t.record(state, of: user, in: conversation, at: .now), idle)
        }
        if accepted, wasIdle { wake.yield() }
        return accepted
    }

    /// Stops the timer; indicators still running are not ended.
    func stop() {
        task.withLockedValue { $0?.cancel() }
        wake.finish()
    }

    /// The indicators running now.
    var count: Int { timeouts.withLockedValue { $0.count } }
}

extension NodeEngine {
    /// TYPING: relayed to the sessions of the other participants (but those who block the user) as a seq 0 `typing` change; not
    /// stored, not answered. Dropped when the sender is not a member of the conversation.
    func relayTyping(_ typing: Typing, from session: NodeSession, as auth: NodeSession.Auth) async {
        let user = auth.user
        // An alias or a merged-away id names the conversation it resolved to (SPEC §6.1),
        // whose id the other participants know.
        let found = try? await store.read { r -> (id: ConversationID, participants: Set<UserID>)? in
            var id = typing.conversationID
            if try r.conversation(id)?.isLive != true, let target = try r.resolvedConversation(id) { id = target }
            guard let state = try r.participantState(of: user, in: id), state.isMember else { return nil }
            return (id, try r.participants(of: id))
        }
        guard let found, typingExpiry.record(typing.state, of: user, in: found.id) else { return }
        let (id, participants) = found
        relay(
            Change(seq: 0, event: .typing(TypingChanged(conversationID: id, user: user, state: typing.state))),
            to: blockLists.recipients(participants.subtracting([user]), of: user), except: session)
    }

    /// Relays `finished` for indicators that were not refreshed in time, to the conversation's
    /// participants as they are now (every session of the typing user's peers).
    func relayExpiredTyping(_ ended: [TypingExpiry.Key]) async {
        for key in ended {
            guard let participants = try? await store.read({ r in try r.participants(of: key.conversation) }) else {
                continue
            }
            relay(
                Change(
                    seq: 0,
                    event: .typing(TypingChanged(conversationID: key.conversation, user: key.user, state: .finished))),
                to: blockLists.recipients(participants.subtracting([key.user]), of: key.user), except: nil)
        }
    }
}
