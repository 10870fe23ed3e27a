import Foundation
import LaminaModel

/// One operation in the replication log.
package struct ReplicationRecord: Hashable, Sendable {
    package var origin: NodeID
    /// Counts up from 1 per origin node, without gaps.
    package var counter: UInt64
    package var hlc: HLCTimestamp
    /// The operation as the node encoded it.
    package var op: [UInt8]

    package init(origin: NodeID, counter: UInt64, hlc: HLCTimestamp, op: [UInt8]) {
        self.origin = origin
        self.counter = counter
        self.hlc = hlc
        self.op = op
    }
}

extension StorageTransaction {
    /// Appends an operation made on this node (`origin`) with the next counter, and returns it.
    package func appendLocalOperation(_ op: [UInt8], origin: NodeID, hlc: HLCTimestamp) throws(StorageError) -> UInt64 {
        let next = try heldCounter(of: origin) + 1
        try insertOperation(ReplicationRecord(origin: origin, counter: next, hlc: hlc, op: op), bornHere: true)
        return next
    }

    /// Stores an operation received from a peer. Returns false for one already held (a replay).
    /// Counters of an origin must arrive without gaps.
    @discardableResult
    package func appendOperation(_ record: ReplicationRecord) throws(StorageError) -> Bool {
        let held = try heldCounter(of: record.origin)
        if record.counter <= held {
            return false
        }
        guard record.counter == held + 1 else {
            throw StorageError(
                .invalidArgument, "operation \(record.counter) of \(record.origin) leaves a gap after \(held)")
        }
        try insertOperation(record)
        return true
    }

    /// The highest counter of `origin` in the log (0: none), from the writer's cache when a
    /// command of this writer read or wrote it before.
    package func heldCounter(of origin: NodeID) throws(StorageError) -> UInt64 {
        if let cached = cache.counter(of: origin) { return cached }
        let held = try read.heldCounter(of: origin)
        cache.remember(counter: held, of: origin)
        return held
    }

    /// `bornHere`: an operation of this node (see `WriterCache.remember(counter:of:bornHere:)`).
    private func insertOperation(_ record: ReplicationRecord, bornHere: Bool = false) throws(StorageError) {
        try checkBlob(record.op, "a replication op")
        let (p, l, n) = try Columns.hlc(record.hlc)
        let insert = try statements.insertOperation
        insert.bind(1, Columns.node(record.origin))
        insert.bind(2, try Columns.int64(record.counter, "counter"))
        insert.bind(3, p)
        insert.bind(4, l)
        insert.bind(5, n)
        insert.bind(6, record.op)
        try insert.execute()
        cache.remember(counter: record.counter, of: record.origin, bornHere: bornHere)
        cache.didLogOperation()
    }

    /// Parks a replicated operation (held in the log, `bytes` its record's size) until
    /// `conversation` is held here. Returns false for one already parked.
    @discardableResult
    package func park(origin: NodeID, counter: UInt64, conversation: ConversationID, bytes: Int, at time: Timestamp)
        throws(StorageError) -> Bool
    {
        try db.run(
            "INSERT OR IGNORE INTO replication_parked (conversation_id, origin_node, counter, parked_at, bytes) VALUES (?, ?, ?, ?, ?)",
            [
                Columns.blob(conversation.uuid), Columns.node(origin), try Columns.int64(counter, "counter"),
                time.millisecondsSince1970, bytes,
            ])
        return db.changesCount > 0
    }

    /// Gives up `origin`'s oldest parked operations until one more of `bytes` fits in `limits`
    /// (count and bytes per origin); returns those given up (origin, counter).
    package func makeRoomToPark(origin: NodeID, bytes: Int, within limits: ParkingLimits) throws(StorageError) -> [(
        NodeID, UInt64
    )] {
        let node = Columns.node(origin)
        guard
            let totals = try db.row(
                "SELECT count(*) AS n, coalesce(sum(bytes), 0) AS b FROM replication_parked WHERE origin_node = ?",
                [node])
        else { return [] }
        var count: Int64 = totals["n"]
        var held: Int64 = totals["b"]
        guard count + 1 > Int64(limits.operationsPerOrigin) || held + Int64(bytes) > Int64(limits.bytesPerOrigin) else {
            return []
        }
        var given: [(NodeID, UInt64)] = []
        for row in try db.rows(
            "SELECT counter, bytes FROM replication_parked WHERE origin_node = ? ORDER BY counter", [node])
        {
            guard count + 1 > Int64(limits.operationsPerOrigin) || held + Int64(bytes) > Int64(limits.bytesPerOrigin)
            else { break }
            let counter: Int64 = row["counter"]
            let size: Int64 = row["bytes"]
            try db.run("DELETE FROM replication_parked WHERE origin_node = ? AND counter = ?", [node, counter])
            count -= 1
            held -= size
            given.append((origin, UInt64(counter)))
        }
        return given
    }

    /// Gives up the operations parked before `time`; returns how many.
    package func abandonParked(before time: Timestamp) throws(StorageError) -> Int {
        try db.run("DELETE FROM replication_parked WHERE parked_at < ?", [time.millisecondsSince1970])
        return db.changesCount
    }

    /// Forgets the operations parked for `conversation` (they are being applied).
    package func unpark(_ conversation: ConversationID) throws(StorageError) {
        try db.run("DELETE FROM replication_parked WHERE conversation_id = ?", [Columns.blob(conversation.uuid)])
    }

    /// Stores a node-wide setting.
    package func setSetting(_ key: String, _ value: [UInt8]) throws(StorageError) {
        try checkBlob(value, "a setting")
        try db.run(
            "INSERT INTO node_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, Data(value)])
    }

    /// Stores a node-wide setting unless it is set already (several nodes on one store
    /// starting at once keep the first one's).
    package func setSettingIfAbsent(_ key: String, _ value: [UInt8]) throws(StorageError) {
        try checkBlob(value, "a setting")
        try db.run(
            "INSERT INTO node_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", [key, Data(value)])
    }
}

extension StorageReader {
    /// The highest counter held per origin node: one index seek per origin (origins are few,
    /// the log is long).
    package func versionVector() throws(StorageError) -> [NodeID: UInt64] {
        var out: [NodeID: UInt64] = [:]
        var next = try db.int64("SELECT min(origin_node) FROM replication_log")
        while let origin = next {
            out[Columns.node(origin)] = UInt64(
                try db.int64("SELECT max(counter) FROM replication_log WHERE origin_node = ?", [origin]) ?? 0)
            next = try db.int64("SELECT min(origin_node) FROM replication_log WHERE origin_node > ?", [origin])
        }
        return out
    }

    /// The highest counter of `origin` in the log (0: none).
    package func heldCounter(of origin: NodeID) throws(StorageError) -> UInt64 {
        UInt64(
            try db.int64("SELECT max(counter) FROM replication_log WHERE origin_node = ?", [Columns.node(origin)]) ?? 0)
    }

    /// An origin's operations after `counter`, in order, at most `limit`.
    package func operations(of origin: NodeID, after counter: UInt64, limit: Int) throws(StorageError)
        -> [ReplicationRecord]
    {
        try checkLimit(limit)
        return try db.rows(
            "SELECT * FROM replication_log WHERE origin_node = ? AND counter > ? ORDER BY counter LIMIT ?",
            [Columns.node(origin), try Columns.int64(counter, "counter"), limit]
        ).map { (row) throws(StorageError) -> ReplicationRecord in
            let counter: Int64 = row["counter"]
            return ReplicationRecord(
                origin: origin, counter: UInt64(counter), hlc: try Columns.hlc(row, "hlc"),
                op: try Columns.bytes(row, "op"))
        }
    }

    /// The operations parked for `conversation` (origin, counter), awaiting its creation.
    package func parkedOperations(of conversation: ConversationID) throws(StorageError) -> [(NodeID, UInt64)] {
        try db.rows(
            "SELECT origin_node, counter FROM replication_parked WHERE conversation_id = ? ORDER BY origin_node, counter",
            [Columns.blob(conversation.uuid)]
        ).map { row in
            let origin: Int64 = row["origin_node"]
            let counter: Int64 = row["counter"]
            return (Columns.node(origin), UInt64(counter))
        }
    }

    /// How many operations are parked (metrics, tests).
    package func parkedOperationCount() throws(StorageError) -> Int {
        Int(try db.int64("SELECT count(*) FROM replication_parked") ?? 0)
    }

    /// A node-wide setting, if set.
    package func setting(_ key: String) throws(StorageError) -> [UInt8]? {
        guard let row = try db.row("SELECT value FROM node_settings WHERE key = ?", [key]) else { return nil }
        return try Columns.bytes(row, "value")
    }
}
