import LaminaModel

/// One write to conversation metadata: a string set at a key path, or the path deleted
/// (a tombstone), stamped with the writer's HLC reading.
public struct MetadataOperation: Hashable, Sendable {
    public enum Change: Hashable, Sendable {
        case set(String)
        case delete
    }

    public var path: MetadataKeyPath
    public var change: Change
    public var timestamp: HLCTimestamp

    public init(_ change: Change, at path: MetadataKeyPath, timestamp: HLCTimestamp) {
        self.path = path
        self.change = change
        self.timestamp = timestamp
    }

    /// The order in which writes take effect: by timestamp; at the same timestamp the
    /// shallower path first (so "replace a subtree" is a tombstone and leaf sets sharing
    /// one reading); then a delete before a set, then by string value, so it is total.
    public static func precedes(_ a: MetadataOperation, _ b: MetadataOperation) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp < b.timestamp }
        if a.path.components.count != b.path.components.count {
            return a.path.components.count < b.path.components.count
        }
        if a.path != b.path { return a.path < b.path }
        switch (a.change, b.change) {
        case (.delete, .delete): return false
        case (.delete, .set): return true
        case (.set, .delete): return false
        case (.set(let x), .set(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
        }
    }

    /// Last writer wins at one key path: whether `incoming` replaces `current`, the write a
    /// store holds for that path (a set or a tombstone; nil when none).
    public static func wins(_ incoming: MetadataOperation, over current: MetadataOperation?) -> Bool {
        guard let current else { return true }
        return precedes(current, incoming)
    }

    /// Whether `other` hides the string that `write` set (see `MetadataLWW`): a later write
    /// at the same path or at an ancestor, or a later *set* at a descendant.
    public static func hides(_ other: MetadataOperation, _ write: MetadataOperation) -> Bool {
        guard precedes(write, other) else { return false }
        let mine = write.path.components
        let theirs = other.path.components
        if theirs.count <= mine.count { return mine.starts(with: theirs) }
        guard case .set = other.change else { return false }
        return theirs.starts(with: mine)
    }
}

/// Conversation metadata as last-writer-wins per key path, deletions included.
///
/// The state keeps, per path, the latest write and the latest *set*; merge is pointwise
/// max in `MetadataOperation.precedes` order. The materialised `Metadata` is exactly what
/// replaying every write in that order with `Metadata.set` / `Metadata.remove` gives
/// (without empty dictionaries). That is, a string set at path P is visible iff:
/// - no later write (set or delete) exists at P or at any ancestor of P, and
/// - no later *set* exists at any descendant of P.
///
/// Overlap of a parent and a child (a string at `a` and a string at `a.b` written
/// concurrently): the later HLC wins the overlapping subtree. If `a` is later, `a` is
/// the string and `a.b` is gone; if `a.b` is later, `a` is a dictionary holding `b`.
/// A later delete of `a` removes `a.b`; a delete of `a.b` does not remove a string at
/// `a` (there is no `a.b` inside a string). Dictionaries left empty are not materialised.
public struct MetadataLWW: ReplicatedState, Hashable {
    public typealias Operation = MetadataOperation

    /// The latest write and latest set at one path.
    public struct Entry: Hashable, Sendable {
        public var latest: MetadataOperation
        public var latestSet: MetadataOperation?
    }

    public private(set) var entries: [MetadataKeyPath: Entry]

    public init() { entries = [:] }

    /// The state holding `metadata` as written at `timestamp` (e.g. at creation).
    public init(_ metadata: Metadata, at timestamp: HLCTimestamp) {
        self.init(metadata.leaves.map { MetadataOperation(.set($0.1), at: $0.0, timestamp: timestamp) })
    }

    public mutating func apply(_ operation: MetadataOperation) {
        var entry = entries[operation.path] ?? Entry(latest: operation, latestSet: nil)
        if MetadataOperation.wins(operation, over: entry.latest) { entry.latest = operation }
        if case .set = operation.change, MetadataOperation.wins(operation, over: entry.latestSet) {
            entry.latestSet = operation
        }
        entries[operation.path] = entry
    }

    public func merged(with other: MetadataLWW) -> MetadataLWW {
        var out = self
        for entry in other.entries.values {
            out.apply(entry.latest)
            if let set = entry.latestSet { out.apply(set) }
        }
        return out
    }

    /// The metadata as it stands (see the type's rules).
    public var metadata: Metadata {
        var out = Metadata()
        for (path, entry) in entries {
            guard case .set(let value) = entry.latest.change, isVisible(path, entry.latest) else { continue }
            out.set(.string(value), at: path)
        }
        return out
    }

    private func isVisible(_ path: MetadataKeyPath, _ write: MetadataOperation) -> Bool {
        let depth = path.components.count
        // Ancestors: any later write hides.
        for cut in stride(from: 1, to: depth, by: 1) {
            if let ancestor = try? MetadataKeyPath(Array(path.components.prefix(cut))),
                let entry = entries[ancestor], MetadataOperation.hides(entry.latest, write)
            {
                return false
            }
        }
        // Descendants: any later set hides.
        for (other, entry) in entries
        where other.components.count > depth && other.components.starts(with: path.components) {
            if let set = entry.latestSet, MetadataOperation.hides(set, write) { return false }
        }
        return true
    }

    /// The writes that set `value` at `path` at `timestamp`: a string is one set; a
    /// dictionary replaces the subtree (a tombstone at `path` and a set per leaf, all at
    /// `timestamp`). The result is checked against `Limits` before anything is returned.
    public func operations(setting value: MetadataValue, at path: MetadataKeyPath, timestamp: HLCTimestamp)
        throws(MergeError) -> [MetadataOperation]
    {
        var ops: [MetadataOperation]
        switch value {
        case .string(let s):
            ops = [MetadataOperation(.set(s), at: path, timestamp: timestamp)]
        case .dictionary(let d):
            ops = [MetadataOperation(.delete, at: path, timestamp: timestamp)]
            for (sub, s) in Metadata(d).leaves {
                guard let full = try? MetadataKeyPath(path.components + sub.components) else {
                    throw MergeError(
                        .invalidMetadata,
                        "setting a dictionary at \(path) nests deeper than \(Limits.maxMetadataDepth) levels")
                }
                ops.append(MetadataOperation(.set(s), at: full, timestamp: timestamp))
            }
        }
        try check(ops)
        return ops
    }

    /// The write that deletes `path` at `timestamp`.
    public func operation(deleting path: MetadataKeyPath, timestamp: HLCTimestamp) -> MetadataOperation {
        MetadataOperation(.delete, at: path, timestamp: timestamp)
    }

    /// Throws when applying `ops` would leave metadata outside `Limits`.
    public func check(_ ops: [MetadataOperation]) throws(MergeError) {
        var next = self
        for op in ops { next.apply(op) }
        do { try next.metadata.validate() } catch { throw MergeError(.invalidMetadata, error.reason) }
    }
}
