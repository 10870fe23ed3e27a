#if canImport(PostgresNIO)
    import Foundation
    import Logging
    import NIOCore
    import PostgresNIO

    /// The postgres-nio listening connection: notifications on the connection's event loop;
    /// statements sent from any thread through it (`queryIfOpen`).
    final class PostgresNIOListenLink: PostgresListenLink, @unchecked Sendable {
        /// Used by the listener's thread only (`int64`).
        private let session: PostgresSession
        private let connection: PostgresConnection
        private let logger = Logger(label: "lamina.storage.listen")

        init(_ session: PostgresSession) {
            self.session = session
            self.connection = (session.wire as! PostgresNIOWire).connection
        }

        func listen(_ channels: [String], _ handler: @escaping @Sendable (String, String) -> Void) {
            for channel in channels {
                connection.addListener(channel: channel) { _, message in handler(channel, message.payload) }
            }
        }

        func int64(_ sql: String, _ values: [PostgresValue]) throws(StorageError) -> Int64? {
            try session.int64(sql, SQLArguments(values.map(Self.sqlValue)))
        }

        /// The listener binds integers and texts only.
        private static func sqlValue(_ value: PostgresValue) -> SQLValue {
            switch value {
            case .bigint(let v): return .integer(v)
            case .double(let v): return .real(v)
            case .text(let v): return .text(v)
            case .bytea(let v): return .blob(v)
            default: return .null
            }
        }

        func send(_ sql: String, _ values: [PostgresValue], completion: (@Sendable (StorageError?) -> Void)?) {
            guard !connection.isClosed else { return }
            let query = PostgresQuery(unsafeSQL: sql, binds: PostgresNIOWire.bindings(values))
            connection.queryIfOpen(query, logger: logger).whenComplete { result in
                switch result {
                case .success: completion?(nil)
                case .failure(let error): completion?(PostgresNIOErrors.storageError(error))
                }
            }
        }

        var isClosed: Bool { connection.isClosed }

        func onClose(_ body: @escaping @Sendable () -> Void) {
            connection.closeFuture.whenComplete { _ in body() }
        }

        func waitUntilClosed() {
            try? connection.closeFuture.wait()
        }

        func close() {
            connection.close().whenComplete { _ in }
        }
    }
#endif
