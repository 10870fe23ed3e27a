import Foundation
import GRDB
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// A caller that may block commits its command itself when the writer is idle and commands
/// come far apart (`StorageWriter.enqueue(_:mayCommitInline:)`); otherwise the writer thread
/// commits it, in order after what it holds.
@Suite struct InlineCommitTests {
    /// A writer on a migrated database; `limit` is the inline commit limit.
    private static func writer(limit: Duration, _ body: (StorageWriter) async throws -> Void) async throws {
        let (path, cleanup) = temporaryDatabasePath()
        defer { cleanup() }
        try NodeStore(path: path).close()
        let pool = try DatabasePool(path: path)
        // The mean gap between commands is measured up to the spacing (50 ms), far above the
        // test commands' commits; a group gathers for at most that long.
        let writer = StorageWriter(
            connection: SQLiteWriterConnection(pool: pool, joinsWALWrites: false), capacity: 100, maxBatchSize: 64,
            groupDelay: .milliseconds(50), groupTarget: 64, inlineCommitLimit: limit)
        try await body(writer)
        writer.shutdown()
    }

    @Test func anIdleWriterLetsTheCallerCommitAndCompleteBeforeEnqueueReturns() async throws {
        try await Self.writer(limit: .milliseconds(500)) { writer in
            let inline = ThreadRecorder()
            try writer.enqueue(inline, mayCommitInline: true)
            // Applied and completed on this thread, before enqueue returned.
            #expect(inline.completed.get())
            #expect(inline.appliedHere.get() == true)
            #expect(writer.statistics.committedCommands == 1)
            #expect(writer.statistics.inlineCommits == 1)

            // A caller that may not block: the writer thread commits it.
            let queued = ThreadRecorder()
            try writer.enqueue(queued)
            #expect(await queued.done.wait(within: .seconds(60)))
            #expect(queued.appliedHere.get() == false)
            #expect(writer.statistics.committedCommands == 2)
            #expect(writer.statistics.inlineCommits == 1)
            #expect(writer.statistics.transactions == 2)
        }
    }

    @Test func aBusyWriterKeepsTheCommandAndCommitsItInOrder() async throws {
        try await Self.writer(limit: .milliseconds(500)) { writer in
            let order = LockedBox<[String]>([])
            let gate = DispatchSemaphore(value: 0)
            let blocking = BlockingCommand(gate: gate, name: "first", order: order)
            try writer.enqueue(blocking)
            #expect(await blocking.started.wait(within: .seconds(60)))
            // The writer is inside a group: the command waits for it instead of running here.
            let second = ThreadRecorder(name: "second", order: order)
            try writer.enqueue(second, mayCommitInline: true)
            #expect(!second.completed.get())
            gate.signal()
            #expect(await second.done.wait(within: .seconds(60)))
            #expect(second.appliedHere.get() == false)
            #expect(order.get() == ["first", "second"])
        }
    }

    /// A command right after an inline commit (the next frame of the same read, or one that
    /// arrived meanwhile) had no quiet time: it goes to the writer thread, to group with the
    /// rest of its burst instead of costing a commit each.
    @Test func aCommandRightAfterAnInlineCommitGoesToTheWriter() async throws {
        try await Self.writer(limit: .milliseconds(500)) { writer in
            let first = ThreadRecorder(applySeconds: 0.004)
            try writer.enqueue(first, mayCommitInline: true)
            #expect(first.appliedHere.get() == true)
            let next = ThreadRecorder()
            try writer.enqueue(next, mayCommitInline: true)
            #expect(await next.done.wait(within: .seconds(60)))
            #expect(next.appliedHere.get() == false)
        }
    }

    @Test func theQuietTimeStartsAfterTheLatestArrivalOrInlineCommit() {
        let ms: UInt64 = 1_000_000
        var gaps = ArrivalGaps(spacing: 0.003)
        #expect(gaps.quiet == 0.003)  // nothing arrived yet
        gaps.note(at: 100 * ms)
        #expect(gaps.quiet == 0.003)
        gaps.note(at: 101 * ms)
        #expect(abs(gaps.quiet - 0.001) < 1e-9)
        gaps.busy(until: 101 * ms + ms / 2)  // an inline commit of half a millisecond
        gaps.note(at: 101 * ms + ms / 2 + 1_000)
        #expect(gaps.quiet < 0.000_01)
        #expect(gaps.mean > 0.002)  // the mean still counts from arrival to arrival
        gaps.note(at: 200 * ms)
        #expect(gaps.quiet == 0.003)  // capped at the spacing
    }

    @Test func commitsSlowerThanTheLimitOrALimitOfZeroGoToTheWriter() async throws {
        try await Self.writer(limit: .milliseconds(1)) { writer in
            // The first commit takes ~20 ms: the moving average is then past the limit.
            let slow = ThreadRecorder(applySeconds: 0.02)
            try writer.enqueue(slow, mayCommitInline: true)
            #expect(slow.appliedHere.get() == true)
            let next = ThreadRecorder()
            try writer.enqueue(next, mayCommitInline: true)
            #expect(await next.done.wait(within: .seconds(60)))
            #expect(next.appliedHere.get() == false)
        }
        try await Self.writer(limit: .zero) { writer in
            let never = ThreadRecorder()
            try writer.enqueue(never, mayCommitInline: true)
            #expect(await never.done.wait(within: .seconds(60)))
            #expect(never.appliedHere.get() == false)
        }
    }

    /// A completion run inline counts as the writer's: closing the store from it is refused
    /// rather than waiting for itself.
    @Test func closingTheStoreFromAnInlineCompletionIsRefused() async throws {
        try await withTemporaryStore { store, _ in
            let outcome = LockedBox<StorageError.Code?>(nil)
            let caller = pthread_self()
            let ranHere = LockedBox(false)
            try store.submit({ _ in }, mayCommitInline: true) { _ in
                ranHere.set(pthread_equal(caller, pthread_self()) != 0)
                do throws(StorageError) { try store.close() } catch { outcome.set(error.code) }
            }
            #expect(ranHere.get())
            #expect(outcome.get() == .invalidArgument)
            // The store still commits.
            try await store.write { _ in }
        }
    }
}

/// A command that notes whether it was applied on the thread that created it, and when it completed.
private final class ThreadRecorder: StorageCommand, @unchecked Sendable {
    let creator = pthread_self()
    let appliedHere = LockedBox<Bool?>(nil)
    let completed = LockedBox(false)
    let done = Signal()
    let applySeconds: Double
    let name: String
    let order: LockedBox<[String]>?

    init(applySeconds: Double = 0, name: String = "", order: LockedBox<[String]>? = nil) {
        self.applySeconds = applySeconds
        self.name = name
        self.order = order
    }

    func apply(_ db: any SQLSession, cache: WriterCache) throws {
        appliedHere.set(pthread_equal(creator, pthread_self()) != 0)
        // A slow commit, not a wait for another thread.
        if applySeconds > 0 { Thread.sleep(forTimeInterval: applySeconds) }
    }

    func complete(_ failure: (any Error)?) {
        if let order { order.set(order.get() + [name]) }
        completed.set(true)
        done.fire()
    }
}

/// A command that holds its group until `gate` is signalled.
private final class BlockingCommand: StorageCommand, @unchecked Sendable {
    let gate: DispatchSemaphore
    let name: String
    let order: LockedBox<[String]>
    let started = Signal()

    init(gate: DispatchSemaphore, name: String, order: LockedBox<[String]>) {
        self.gate = gate
        self.name = name
        self.order = order
    }

    func apply(_ db: any SQLSession, cache: WriterCache) throws {
        started.fire()
        gate.wait()
    }

    func complete(_ failure: (any Error)?) { order.set(order.get() + [name]) }
}
