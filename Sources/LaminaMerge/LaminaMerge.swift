/// LaminaMerge: pure merge and ordering rules shared by the node, its peers and the SDK.
///
/// - `HybridLogicalClock`: readings for events and message positions.
/// - `DistinctResolution`, `DistinctRegistry`: the one distinct conversation per participant set.
/// - `MembershipLog`: participants as an operation log; who may see which message.
/// - `RecipientStatusLattice`: receipts as a max-lattice; read-up-to positions.
/// - `MetadataLWW`: metadata as last-writer-wins per key path.
/// - `VersionVector`: what each replica has seen; what the other side lacks.
/// - `UnreadCounts`: unread counts derived from a CRDT of events.
///
/// Every state type conforms to `Mergeable` (and most to `ReplicatedState`), whose laws
/// the tests check for all of them.
public enum LaminaMerge {}
