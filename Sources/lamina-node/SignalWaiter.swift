import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Waits for one of `signals` (their default action must already be ignored). dev-cluster
/// only: its supervisor takes a signal as one event among its nodes' exits, its parent's
/// death and the start timeout (`serve` stops through a ServiceGroup).
final class SignalWaiter: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let stream: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation

    init(signals: [Int32]) {
        (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        for signal in signals {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            let continuation = self.continuation
            source.setEventHandler { continuation.yield(signal) }
            source.resume()
            sources.append(source)
        }
    }

    func next() async -> Int32 {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next() ?? SIGTERM
    }
}
