import Logging
import NIOConcurrencyHelpers

/// Starts a node's parts in order and stops the started ones: one stop path, taken by a
/// graceful shutdown and by the rollback of a start that failed part-way.
final class NodeLifecycle: Sendable {
    private let stops = NIOLockedValueBox<[NodePart: @Sendable () async -> Void]>([:])
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Starts `part`: `body` returns it and how to stop it. When `body` throws, every part
    /// started so far is stopped and a ``NodeServerError/startup(_:)`` saying `failure` is
    /// thrown (`failure` nil: the error as it is).
    func start<T>(
        _ part: NodePart, _ failure: @autoclosure () -> String?,
        _ body: () async throws -> (T, stop: @Sendable () async -> Void)
    ) async throws -> T {
        let started: (T, stop: @Sendable () async -> Void)
        do { started = try await body() } catch { throw await rollBack(failure(), error, part) }
        stops.withLockedValue { $0[part] = started.stop }
        return started.0
    }

    /// A start-up step of parts already started (stopped with them); failures as in ``start(_:_:_:)``.
    func step<T>(_ part: NodePart, _ failure: @autoclosure () -> String?, _ body: () async throws -> T) async throws
        -> T
    {
        do { return try await body() } catch { throw await rollBack(failure(), error, part) }
    }

    /// The parts started and not yet stopped.
    var running: Set<NodePart> { stops.withLockedValue { Set($0.keys) } }

    /// Stops the started parts in ``NodePart/stopOrder``, each once.
    func stopAll() async {
        let started = stops.withLockedValue { s in
            defer { s = [:] }
            return s
        }
        for part in NodePart.stopOrder {
            guard let stop = started[part] else { continue }
            await stop()
        }
    }

    private func rollBack(_ failure: String?, _ error: any Error, _ part: NodePart) async -> any Error {
        let started = running
        logger.error(
            "start-up failed: stopping what started",
            metadata: ["part": "\(part)", "started": "\(started.map(\.rawValue).sorted())"])
        await stopAll()
        guard let failure else { return error }
        return NodeServerError.startup("\(failure): \(error)")
    }
}
