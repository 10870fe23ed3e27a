import Foundation

/// The listening connection as `PostgresListener` uses it, over either driver: notifications
/// delivered to a handler, statements sent from any thread without waiting (ephemeral events,
/// presence, wake-ups), and the few the listener waits for (its thread only).
protocol PostgresListenLink: AnyObject, Sendable {
    /// LISTENs on `channels`; `handler(channel, payload)` gets each notification on them, in
    /// the order they arrive (on the driver's thread).
    func listen(_ channels: [String], _ handler: @escaping @Sendable (String, String) -> Void)
    /// Runs `sql` (`$N` parameters) and returns the first column of its first row, waiting for it.
    func int64(_ sql: String, _ values: [PostgresValue]) throws(StorageError) -> Int64?
    /// Sends `sql` without waiting, from any thread; dropped when the connection is closed.
    /// `completion` gets its failure (nil: it ran).
    func send(_ sql: String, _ values: [PostgresValue], completion: (@Sendable (StorageError?) -> Void)?)
    /// Whether the connection is closed (or failed).
    var isClosed: Bool { get }
    /// Calls `body` once the connection has closed (at once when it has).
    func onClose(_ body: @escaping @Sendable () -> Void)
    /// Waits until the connection has closed.
    func waitUntilClosed()
    /// Closes the connection without waiting for it.
    func close()
}

extension PostgresConnector {
    /// A listening connection of the configured driver, set up as the store's connections are.
    func listenLink() throws(StorageError) -> any PostgresListenLink {
        guard driver == .libpq else {
            _ = try openWire()  // names the configuration error
            throw StorageError(.invalidArgument, "no PostgreSQL driver")
        }
        return try LibpqListenLink(connector: self)
    }
}
