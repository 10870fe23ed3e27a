/// How much a node keeps of replicated operations parked until their conversation's creation
/// arrives (SPEC §6.5), per origin node: at most `operationsPerOrigin` operations and
/// `bytesPerOrigin` bytes of their log records, none longer than `lifetime`. Parking past a bound
/// gives up that origin's oldest parked operations; the sweep of every applying transaction gives
/// up those parked longer than `lifetime`. A given-up operation stays in the replication log
/// (relayed to peers, counted in the version vector) but is never applied on this node; each is
/// counted (`lamina_replication_parked_abandoned`) and logged.
package struct ParkingLimits: Sendable, Hashable {
    package var operationsPerOrigin = 10_000
    package var bytesPerOrigin = 16 << 20
    package var lifetime: Duration = .seconds(24 * 3600)

    package init() {}
}
