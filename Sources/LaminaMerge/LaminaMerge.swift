/// LaminaMerge: pure merge and ordering rules shared by the node, its peers and the SDK.
///
/// - `HybridLogicalClock`: readings for events and message positions.
/// - `DistinctResolution`, `DistinctRegistry`: the one distinct conversation per participant set;
///   `DistinctBirth`, `DistinctResolution.classes(of:)` and `join`: which distinct conversations
///   created on different nodes merge (those created concurrently), the same on every node.
/// - `MembershipLog`, `MembershipStanding`: participants as an operation log; who may see which message.
/// - `RecipientStatusLattice`: receipts as a max-lattice; read-up-to positions.
/// - `MetadataLWW`: metadata as last-writer-wins per key path.
/// - `VersionVector`: what each replica has seen; what the other side lacks.
/// - `UnreadCounts`: unread counts derived from a CRDT of events.
///
/// Every state type conforms to `Mergeable` (and most to `ReplicatedState`), whose laws
/// the tests check for all of them. Each rule is also a static function over the slice of
/// state it depends on (`RecipientStatusLattice.status(of:for:recorded:deliveredUpTo:readUpTo:)`,
/// `RecipientStatusLattice.reported`, `MetadataOperation.wins(_:over:)` and `hides`,
/// `MembershipStanding.applying(_:to:)` and `canSee`, `DistinctResolution.survivor(_:_:)`,
/// `UnreadCounts.isUnread`), which the full-state types call and which stores holding only
/// that slice (the node's, the SDK's) call to decide the same way.
///
/// (No namespace type here: `LaminaMerge.X` names the module's `X`, e.g.
/// `LaminaMerge.MembershipOperation` where a store has its own type of that name.)
