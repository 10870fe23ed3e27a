import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a child process's output pipe. Foundation's `availableData` and
/// `readDataToEndOfFile()` trap when a signal interrupts the read (EINTR: "Interrupted system
/// call"), which took down a whole test run; these retry the read instead.
public enum PipeReading {
    /// The next bytes the pipe holds, waiting until there are some; empty at end of file (or
    /// when the descriptor can no longer be read).
    public static func next(_ handle: FileHandle, upTo limit: Int = 64 * 1024) -> Data {
        var buffer = Data(count: limit)
        let count = buffer.withUnsafeMutableBytes { raw -> Int in
            while true {
                let n = read(handle.fileDescriptor, raw.baseAddress, limit)
                if n < 0, errno == EINTR { continue }
                return max(n, 0)
            }
        }
        buffer.count = count
        return buffer
    }

    /// Everything the pipe delivers until its writers close it.
    public static func toEnd(_ handle: FileHandle) -> Data {
        var all = Data()
        while true {
            let chunk = next(handle)
            if chunk.isEmpty { return all }
            all.append(chunk)
        }
    }
}
