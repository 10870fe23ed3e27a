import Foundation
import LaminaModel

/// The clock, sleep and randomness the sync engine uses, injected so tests drive time.
public struct SyncEnvironment: Sendable {
    /// The current wall-clock time.
    public var now: @Sendable () -> Timestamp
    /// Suspends for `duration` (throws when cancelled).
    public var sleep: @Sendable (Duration) async throws -> Void
    /// A uniformly distributed value in 0..<1 (for jitter).
    public var random: @Sendable () -> Double

    public init(
        now: @escaping @Sendable () -> Timestamp, sleep: @escaping @Sendable (Duration) async throws -> Void,
        random: @escaping @Sendable () -> Double
    ) {
        self.now = now
        self.sleep = sleep
        self.random = random
    }

    /// The system clock, `Task.sleep` and the system random generator.
    public static let live = SyncEnvironment(
        now: { Timestamp.now() },
        sleep: { try await Task.sleep(for: $0) },
        random: { Double.random(in: 0..<1) })
}
