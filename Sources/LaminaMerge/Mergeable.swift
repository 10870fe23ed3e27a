/// A state-based replicated value (a join semilattice): `merged(with:)` must be
/// commutative, associative and idempotent, so replicas that exchange states in any
/// order, any number of times, converge. `LaminaMergeTests` checks these laws for
/// every conforming type.
public protocol Mergeable: Equatable, Sendable {
    /// The least upper bound of `self` and `other`.
    func merged(with other: Self) -> Self
}

extension Mergeable {
    /// Merges `other` into `self`.
    public mutating func merge(_ other: Self) { self = merged(with: other) }
}

/// A `Mergeable` state that is also built from operations: applying an operation is
/// the same as merging the state holding only that operation, so replicas that
/// receive the same operations in any order, with duplicates, end in the same state.
public protocol ReplicatedState: Mergeable {
    associatedtype Operation: Sendable
    /// The state before any operation (the bottom of the lattice).
    init()
    /// Adds one operation. Total: remote operations are never refused here; validation
    /// of local commands happens before an operation is made.
    mutating func apply(_ operation: Operation)
}

extension ReplicatedState {
    /// The state after applying `operations` to the empty state.
    public init(_ operations: some Sequence<Operation>) {
        self.init()
        for operation in operations { apply(operation) }
    }
}
