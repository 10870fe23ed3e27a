import Foundation
import GRDB
import LaminaModel

/// One operation in the replication log.
public struct ReplicationRecord: Hashable, Sendable {
    public var origin: NodeID
    /// Counts up from 1 per origin node, without gaps.
    public var counter: UInt64
    public var hlc: HLCTimestamp
    /// The operation as the node encoded it.
    public var op: [UInt8]
}

extension StorageTransaction {
    /// Appends an operation made on this node (`origin`) with the next counter, and returns it.
    public func appendLocalOperation(_ op: [UInt8], origin: NodeID, hlc: HLCTimestamp) throws(StorageError) -> UInt64 {
        let next = try read.versionVector()[origin, default: 0] + 1
        _ = try appendOperation(ReplicationRecord(origin: origin, counter: next, hlc: hlc, op: op))
        return next
    }

    /// Stores an operation received from a peer. Returns false for one already held (a replay).
    /// Counters of an origin must arrive without gaps.
    @discardableResult
    public func appendOperation(_ record: ReplicationRecord) throws(StorageError) -> Bool {
        try checkBlob(record.op, "a replication op")
        let held = try read.versionVector()[record.origin, default: 0]
        if record.counter <= held {
            return false
        }
        guard record.counter == held + 1 else {
            throw StorageError(.invalidArgument, "operation \(record.counter) of \(record.origin) leaves a gap after \(held)")
        }
        let (p, l, n) = try Columns.hlc(record.hlc)
        try db.run(
            "INSERT INTO replication_log (origin_node, counter, hlc_physical, hlc_logical, hlc_node, op) VALUES (?, ?, ?, ?, ?, ?)",
            [Columns.node(record.origin), try Columns.int64(record.counter, "counter"), p, l, n, Data(record.op)]
        )
        return true
    }

    /// Stores a node-wide setting.
    public func setSetting(_ key: String, _ value: [UInt8]) throws(StorageError) {
        try checkBlob(value, "a setting")
        try db.run("INSERT INTO node_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [key, Data(value)])
    }
}

extension StorageReader {
    /// The highest counter held per origin node.
    public func versionVector() throws(StorageError) -> [NodeID: UInt64] {
        var out: [NodeID: UInt64] = [:]
        for row in try db.rows("SELECT origin_node, max(counter) AS counter FROM replication_log GROUP BY origin_node") {
            let counter: Int64 = row["counter"]
            out[Columns.node(row["origin_node"] as Int64)] = UInt64(counter)
        }
        return out
    }

    /// An origin's operations after `counter`, in order, at most `limit`.
    public func operations(of origin: NodeID, after counter: UInt64, limit: Int) throws(StorageError) -> [ReplicationRecord] {
        try checkLimit(limit)
        return try db.rows(
            "SELECT * FROM replication_log WHERE origin_node = ? AND counter > ? ORDER BY counter LIMIT ?",
            [Columns.node(origin), try Columns.int64(counter, "counter"), limit]
        ).map { (row) throws(StorageError) -> ReplicationRecord in
            let counter: Int64 = row["counter"]
            return ReplicationRecord(origin: origin, counter: UInt64(counter), hlc: try Columns.hlc(row, "hlc"), op: try Columns.bytes(row, "op"))
        }
    }

    /// A node-wide setting, if set.
    public func setting(_ key: String) throws(StorageError) -> [UInt8]? {
        guard let row = try db.row("SELECT value FROM node_settings WHERE key = ?", [key]) else { return nil }
        return try Columns.bytes(row, "value")
    }
}
