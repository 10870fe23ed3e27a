/// The parts of a running node. A part needs the ones declared before it, and starts in
/// that order (``startOrder``); the one stop path stops the started ones in ``stopOrder``.
public enum NodePart: String, CaseIterable, Sendable {
    /// The store (SQLite in the data directory, or PostgreSQL).
    case store
    /// The engine: sessions, commands, fan-out, the outboxes' producers.
    case engine
    /// Rich content files and their sweeps.
    case content
    /// Webhook delivery: prepared before the sync listener (commands queue events for it),
    /// its lanes started once the listener is up (they need its URL).
    case webhooks
    /// Push delivery: prepared before the sync listener, its lanes started after it.
    case pushes
    /// The sync listener (TLS + HTTP/2; the Server API and content share it).
    case transport
    /// Peering: the peer listener, dialers and links (when configured).
    case peers
    /// The admin listener: metrics and health (unless disabled).
    case admin
    /// The storage pruner's schedule.
    case pruner
    /// The health log's schedule.
    case healthLog

    /// Start order: the declaration order.
    public static var startOrder: [NodePart] { allCases }

    /// Stop order. Not the reverse of the start order: the engine ends its sessions before
    /// the sync listener drains (else a graceful drain waits its whole timeout for streams
    /// that live as long as their clients), the deliveries stop before the store closes,
    /// and the admin listener stops last, so `/health/ready` answers "stopping" throughout.
    public static let stopOrder: [NodePart] = [
        .healthLog, .peers, .pruner, .engine, .webhooks, .pushes, .transport, .content, .store, .admin,
    ]
}
