import Foundation

/// Standard input as an async stream of lines, read on a thread of its own (so a blocked
/// read never holds up the event loop); nil once, at end of input (Ctrl-D, or a pipe's end).
enum LineReader {
    /// The longest line kept, in bytes; longer lines are cut (ChatInput rejects them).
    static let maxLineBytes = 64 * 1024

    static func lines() -> AsyncStream<String?> {
        let (stream, continuation) = AsyncStream<String?>.makeStream()
        Thread.detachNewThread {
            while let line = readLine(strippingNewline: true) {
                continuation.yield(
                    line.utf8.count <= maxLineBytes
                        ? line : String(decoding: line.utf8.prefix(maxLineBytes), as: UTF8.self))
            }
            continuation.yield(nil)
            continuation.finish()
        }
        return stream
    }
}
