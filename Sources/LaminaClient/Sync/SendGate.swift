import Synchronization

/// Whether a sync session may still take outbox entries to send. The session closes it the
/// moment it ends, before the engine puts the in-flight entries back to pending, and the
/// outbox checks it inside the transaction that marks entries in flight: a flush still under
/// way when the connection dropped cannot mark entries in flight after they were put back
/// (they would stay in flight, unsent, until the next disconnection).
final class SendGate: Sendable {
    private let open = Atomic<Bool>(true)

    var isOpen: Bool { open.load(ordering: .acquiring) }

    func close() { open.store(false, ordering: .releasing) }
}
