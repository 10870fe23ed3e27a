import LaminaModel

/// What the writer keeps between commands so a command does not read it again: the headers
/// (flags and participants) of conversations recently written to. Touched only on the
/// writer thread, inside commands.
///
/// Correctness rule: an entry is the committed-or-about-to-commit state of its row. Every
/// write that changes a header (membership, distinctness, merge, deletion, creation) clears
/// the cache, and so does every rollback (a failing command, a failing group, a failing
/// `attempt`), so nothing a rollback undid can be served.
final class WriterCache: @unchecked Sendable {
    /// Entries at most; past it the cache starts over.
    static let maxHeaders = 10_000
    private var headers: [ConversationID: ConversationHeader] = [:]

    func header(_ id: ConversationID) -> ConversationHeader? { headers[id] }

    func remember(_ header: ConversationHeader) {
        if headers.count >= Self.maxHeaders { headers.removeAll(keepingCapacity: true) }
        headers[header.id] = header
    }

    func clear() { headers.removeAll(keepingCapacity: true) }
}
