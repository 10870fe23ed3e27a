import Foundation
import LaminaModel
import LaminaStore
import LaminaWire
import NIOConcurrencyHelpers

/// The feed heads other nodes announced (shared PostgreSQL) and not yet read here, and whether
/// a read is under way. At most one read runs at a time: heads announced meanwhile are merged
/// (the highest head per user) and read together by the next one, so a burst of
/// notifications costs one read per round, not one per notification, and never one per session.
final class RemoteFeedReads: Sendable {
    private struct State {
        var wanted: [UserID: UInt64] = [:]
        var reading = false
    }
    private let state = NIOLockedValueBox(State())
    /// Batched reads made since the start, and sessions sent to read their own feed instead
    /// (a failed read, more entries than one read takes): for tests.
    let counts = NIOLockedValueBox((reads: 0, ownReads: 0))

    /// Merges `heads`; true when the caller must start reading (no read was under way).
    func add(_ heads: [(UserID, UInt64)]) -> Bool {
        state.withLockedValue { s -> Bool in
            for (user, head) in heads { s.wanted[user] = max(s.wanted[user] ?? 0, head) }
            guard !s.reading, !s.wanted.isEmpty else { return false }
            s.reading = true
            return true
        }
    }

    /// The heads to read next, taken; nil (and the read over) when none wait.
    func next() -> [UserID: UInt64]? {
        state.withLockedValue { s -> [UserID: UInt64]? in
            guard !s.wanted.isEmpty else {
                s.reading = false
                return nil
            }
            defer { s.wanted = [:] }
            return s.wanted
        }
    }
}

extension NodeEngine {
    /// Shared reads of other nodes' commits made here, and sessions that read their own feed instead.
    package var remoteFeedReadCounts: (reads: Int, ownReads: Int) { remoteFeeds.counts.withLockedValue { $0 } }

    /// Another node committed feed entries up to these heads. The live sessions here of those
    /// users get the entries from ONE read shared by all of them (`StorageReader.feeds`),
    /// handed to them as live entries (``NodeSession/publish(_:)``: sent at once when they
    /// continue where the session is, else queued, where a gap is filled from the feed). A
    /// failed read, or entries beyond what one read takes per user, fall back to each session
    /// reading its own feed (``NodeSession/wake(through:)``), as does a reconnect of the
    /// listening connection: a missed notification loses nothing.
    func wakeSessions(_ heads: [(UserID, UInt64)]) {
        let relevant = heads.filter { !registry.sessions(of: $0.0).isEmpty }
        guard remoteFeeds.add(relevant) else { return }
        Task { [weak self] in
            while let self, let wanted = self.remoteFeeds.next() {
                await self.deliverRemote(wanted)
            }
        }
    }

    /// Reads the entries of `wanted` (user → head) for the live sessions here that lack them,
    /// in reads of at most `BatchedFeedRead.maxUsers` users, and hands them to the sessions.
    private func deliverRemote(_ wanted: [UserID: UInt64]) async {
        var ranges: [FeedRange] = []
        var targets: [UserID: (head: UInt64, sessions: [NodeSession])] = [:]
        for (user, head) in wanted {
            var after: UInt64?
            var waiting: [NodeSession] = []
            for session in registry.sessions(of: user) {
                let (live, sent) = session.state.withLockedValue { ($0.live && $0.phase != .closed, $0.sentThrough) }
                guard live, head > sent else { continue }
                after = min(after ?? sent, sent)
                waiting.append(session)
            }
            guard let after else { continue }
            ranges.append(
                FeedRange(user: user, after: after, through: min(head, after + BatchedFeedRead.maxEntriesPerUser)))
            targets[user] = (head, waiting)
        }
        for start in stride(from: 0, to: ranges.count, by: BatchedFeedRead.maxUsers) {
            let chunk = Array(ranges[start..<min(start + BatchedFeedRead.maxUsers, ranges.count)])
            let read: [UserID: [FeedEntry]]?
            do {
                read = try await store.read { r in try r.feeds(chunk) }
                remoteFeeds.counts.withLockedValue { $0.reads += 1 }
            } catch {
                read = nil
            }
            for range in chunk {
                guard let (head, sessions) = targets[range.user] else { continue }
                let entries = read?[range.user] ?? []
                var changes: [Change]? = []
                for entry in entries {
                    guard let change = try? FeedCoding.decode(entry) else {
                        changes = nil
                        break
                    }
                    changes?.append(change)
                }
                for session in sessions {
                    if let changes {
                        let through = session.state.withLockedValue { $0.sentThrough }
                        let fresh = changes.filter { $0.seq > through }
                        if !fresh.isEmpty { session.publish(fresh) }
                    }
                    // What this read did not bring (a failure, more than it takes, a pruned
                    // entry): the session reads its own feed, paced, through its inbox.
                    if changes == nil || (entries.last?.seq ?? range.after) < head {
                        remoteFeeds.counts.withLockedValue { $0.ownReads += 1 }
                        session.wake(through: head)
                    }
                }
            }
        }
    }
}
