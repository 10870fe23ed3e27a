import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// SIGINT (Ctrl-C) and SIGTERM as an async stream, so a long-running command can close
/// its store and leave cleanly instead of dying mid-write.
enum Interrupts {
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []

    /// A stream yielding once per signal received. Call once per process.
    static func stream() -> AsyncStream<Int32> {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        return stream
    }
}
