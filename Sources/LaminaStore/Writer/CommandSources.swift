import Atomics

/// Who has commands queued for group commit and not yet completed, as the writer's commit
/// policy needs it (the role of PostgreSQL's `commit_siblings`): how many sessions have at
/// least one command in flight, and how many have two or more (they pipeline).
///
/// The group-commit spacing gathers commands from several clients into one synced commit.
/// When exactly one session has commands in flight and it pipelines, what would join a
/// delayed group is its own next commands, which it sends only after ACKs: waiting adds the
/// spacing to every round trip and gathers nothing. The writer then commits at once.
///
/// Sessions report only the transitions of their in-flight count (0↔1, 1↔2), so a busy
/// session does not touch these counters per command.
package final class CommandSources: Sendable {
    private let active = ManagedAtomic(0)
    private let pipelining = ManagedAtomic(0)

    package init() {}

    /// A source's commands in flight went from `old` to `new` (the two differ by one).
    package func moved(from old: Int, to new: Int) {
        switch (old, new) {
        case (0, 1): active.wrappingIncrement(ordering: .relaxed)
        case (1, 0): active.wrappingDecrement(ordering: .relaxed)
        case (1, 2): pipelining.wrappingIncrement(ordering: .relaxed)
        case (2, 1): pipelining.wrappingDecrement(ordering: .relaxed)
        default: break
        }
    }

    /// Exactly one source has commands in flight, and it has two or more.
    var isLonePipeline: Bool {
        pipelining.load(ordering: .relaxed) == 1 && active.load(ordering: .relaxed) == 1
    }
}
