import Foundation
import NIOCore

/// Event-loop work that the completions of one committed group defer to the group's end, so
/// a group costs each event loop one task however many of its commands answer there: the
/// first ACK or feed entry for a stream schedules that stream's flush here, the stream's
/// later frames of the group join the same pending write (one write, one TLS record per
/// stream per group), and each loop is woken once.
///
/// The batch belongs to the thread completing the group (the writer or its completion
/// thread); on any other thread ``schedule(on:_:)`` hands the work to the loop at once.
final class CompletionBatch {
    private var loops: [(loop: any EventLoop, actions: [@Sendable () -> Void])] = []

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// Runs `body` (completions of one group) with a batch open on this thread, then hands
    /// each loop its deferred work in one task, in the order it was deferred.
    static func run(_ body: () -> Void) {
        let batch = CompletionBatch()
        pthread_setspecific(key, Unmanaged.passUnretained(batch).toOpaque())
        body()
        pthread_setspecific(key, nil)
        withExtendedLifetime(batch) {}
        for (loop, actions) in batch.loops {
            if actions.count == 1 {
                loop.execute(actions[0])
            } else {
                loop.execute { for action in actions { action() } }
            }
        }
    }

    /// Runs `action` on `loop`: at the end of the group being completed on this thread, or
    /// at once (`execute`) when no group is.
    static func schedule(on loop: any EventLoop, _ action: @escaping @Sendable () -> Void) {
        guard let pointer = pthread_getspecific(key) else { return loop.execute(action) }
        let batch = Unmanaged<CompletionBatch>.fromOpaque(pointer).takeUnretainedValue()
        if let i = batch.loops.firstIndex(where: { $0.loop === loop }) {
            batch.loops[i].actions.append(action)
        } else {
            batch.loops.append((loop, [action]))
        }
    }
}
