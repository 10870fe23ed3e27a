import Foundation
import LaminaModel

/// A client-chosen id of a command (the object's UUID or a request id), scoped to its user.
package struct IdempotencyKey: Hashable, Sendable {
    package var user: UserID
    package var id: UUID

    package init(user: UserID, id: UUID) {
        self.user = user
        self.id = id
    }
}

/// The outcome of an idempotent write.
package enum IdempotentOutcome<T: Sendable>: Sendable {
    /// The command ran now; `record` is what a retry will get.
    case applied(T, record: [UInt8])
    /// The key was recorded before: the command did not run again; this is the first result.
    case replayed(record: [UInt8])

    /// The recorded result, either way.
    package var record: [UInt8] {
        switch self {
        case .applied(_, let record), .replayed(let record): record
        }
    }
}

extension NodeStore {
    /// Runs `body` once per key: when `key` was recorded, returns the recorded result without
    /// running it; otherwise runs it and records its `record` in the same transaction (first
    /// writer wins). A body that throws records nothing, so a retry runs it again.
    package func write<T: Sendable>(
        idempotencyKey key: IdempotencyKey,
        at time: Timestamp = .now(),
        _ body: @escaping @Sendable (StorageTransaction) throws -> (value: T, record: [UInt8])
    ) async throws -> IdempotentOutcome<T> {
        try await write { tx in
            if let recorded = try tx.read.recordedResult(for: key) {
                return IdempotentOutcome<T>.replayed(record: recorded)
            }
            let (value, record) = try body(tx)
            try tx.recordResult(record, for: key, at: time)
            return .applied(value, record: record)
        }
    }
}

extension StorageTransaction {
    /// Records the result of a command by key. Refuses a key already recorded (`.alreadyExists`).
    package func recordResult(_ result: [UInt8], for key: IdempotencyKey, at time: Timestamp) throws(StorageError) {
        try checkBlob(result, "an idempotency record")
        let inserted = try db.runRaw(
            "INSERT OR IGNORE INTO idempotency_records (user_id, request_id, result, created_at) VALUES (?, ?, ?, ?)"
        ) {
            $0.bind(1, key.user.rawValue)
            $0.bind(2, key.id)
            $0.bind(3, result)
            $0.bind(4, time.millisecondsSince1970)
        }
        guard inserted == 1 else {
            throw StorageError(
                .alreadyExists, "request \(key.id.uuidString.lowercased()) of \(key.user) is already recorded")
        }
    }

    /// Deletes idempotency records created before `time`, except those keyed by the id of a
    /// conversation that exists (SPEC §7: an object id is remembered as long as the object).
    /// Returns how many.
    @discardableResult
    package func pruneIdempotencyRecords(before time: Timestamp) throws(StorageError) -> Int {
        try db.run(
            "DELETE FROM idempotency_records WHERE created_at < ? AND request_id NOT IN (SELECT id FROM conversations)",
            [time.millisecondsSince1970])
        return db.changesCount
    }
}

extension StorageReader {
    /// The recorded result of a command, if any.
    package func recordedResult(for key: IdempotencyKey) throws(StorageError) -> [UInt8]? {
        var result: [UInt8]?
        try db.eachRow(
            "SELECT result FROM idempotency_records WHERE user_id = ? AND request_id = ?",
            bind: {
                $0.bind(1, key.user.rawValue)
                $0.bind(2, key.id)
            }
        ) { (row) throws(StorageError) in
            guard let bytes = row.bytes(0) else { throw StorageError(.corrupt, "column result holds no bytes") }
            result = bytes
        }
        return result
    }
}
