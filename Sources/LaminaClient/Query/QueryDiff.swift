/// The difference between two ordered results of a query, in the form table and list
/// views apply: delete the `deletes` (old indices), insert the `inserts` (new indices),
/// move each `moves` entry from its old to its new index; `updates` are objects present in
/// both whose value changed (new indices, moved ones included).
public struct QueryChanges: Hashable, Sendable {
    public struct Move: Hashable, Sendable {
        public var from: Int
        public var to: Int
        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    public var deletes: [Int]
    public var inserts: [Int]
    public var moves: [Move]
    public var updates: [Int]

    public init(deletes: [Int] = [], inserts: [Int] = [], moves: [Move] = [], updates: [Int] = []) {
        self.deletes = deletes
        self.inserts = inserts
        self.moves = moves
        self.updates = updates
    }

    public var isEmpty: Bool { deletes.isEmpty && inserts.isEmpty && moves.isEmpty && updates.isEmpty }
}

/// Diffs ordered lists of unique identifiers. Moves are the fewest possible: every object
/// kept in both lists stays unless it is off the longest increasing subsequence of new
/// positions taken in old order. O(n log n).
public enum QueryDiff {
    public static func diff<ID: Hashable>(old: [ID], new: [ID], changed: Set<ID> = []) -> QueryChanges {
        var newIndex: [ID: Int] = [:]
        newIndex.reserveCapacity(new.count)
        for (i, id) in new.enumerated() { newIndex[id] = i }
        var oldIndex: [ID: Int] = [:]
        oldIndex.reserveCapacity(old.count)
        for (i, id) in old.enumerated() { oldIndex[id] = i }

        var changes = QueryChanges()
        // Objects kept, in old order, with their new index.
        var kept: [(old: Int, new: Int)] = []
        for (i, id) in old.enumerated() {
            if let j = newIndex[id] { kept.append((i, j)) } else { changes.deletes.append(i) }
        }
        for (j, id) in new.enumerated() where oldIndex[id] == nil { changes.inserts.append(j) }

        let stay = longestIncreasingSubsequence(kept.map(\.new))
        for (k, pair) in kept.enumerated() where !stay.contains(k) {
            changes.moves.append(QueryChanges.Move(from: pair.old, to: pair.new))
        }
        changes.updates = kept.filter { changed.contains(old[$0.old]) }.map(\.new).sorted()
        return changes
    }

    /// Indices (into `values`) of one longest strictly increasing subsequence.
    static func longestIncreasingSubsequence(_ values: [Int]) -> Set<Int> {
        guard !values.isEmpty else { return [] }
        var tails: [Int] = []  // index into values of the tail of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (i, v) in values.enumerated() {
            var lo = 0
            var hi = tails.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if values[tails[mid]] < v { lo = mid + 1 } else { hi = mid }
            }
            if lo > 0 { previous[i] = tails[lo - 1] }
            if lo == tails.count { tails.append(i) } else { tails[lo] = i }
        }
        var out = Set<Int>()
        var k = tails.last!
        while k >= 0 {
            out.insert(k)
            k = previous[k]
        }
        return out
    }
}
