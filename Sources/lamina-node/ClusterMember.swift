import Foundation
import LaminaProcess

#if canImport(Glibc)
    import Glibc
#endif

/// What happens to a development cluster while it runs.
enum ClusterEvent: Sendable {
    /// Node `index` printed its "is serving" line.
    case serving(Int)
    /// Node `index` exited with `status`.
    case exited(Int, Int32)
    case signal(Int32)
    /// The process that started the supervisor exited (it was reparented).
    case parentExited
    /// Not every node served in time.
    case startTimeout
}

/// One node of `lamina-node dev-cluster`: a `lamina-node serve` child process. Its log lines
/// (standard error) are passed on with a `[node-<i>]` prefix; its welcome text (standard
/// output) is kept and shown only if it exits before serving. Plain threads read the pipes
/// and wait for the exit (no dispatch sources).
final class ClusterMember: Sendable {
    let node: ClusterLayout.Node
    let process: ChildProcess

    private init(node: ClusterLayout.Node, process: ChildProcess) {
        self.node = node
        self.process = process
    }

    var pid: Int32 { process.processIdentifier }

    /// Starts `binary` with `arguments`; reports on `events`.
    static func launch(
        _ node: ClusterLayout.Node, binary: String, arguments: [String],
        events: AsyncStream<ClusterEvent>.Continuation
    ) throws -> ClusterMember {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let prefix = "[\(node.name)] "
        let index = node.index
        Thread.detachNewThread {
            let reader = stdout.fileHandleForReading
            var text = ""
            var serving = false
            while true {
                let chunk = PipeReading.next(reader)
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
                if !serving, text.contains("is serving") {
                    serving = true
                    events.yield(.serving(index))
                }
            }
            if !serving { write(text, prefix: prefix, to: FileHandle.standardError) }
        }
        Thread.detachNewThread {
            let reader = stderr.fileHandleForReading
            var pending = ""
            while true {
                let chunk = PipeReading.next(reader)
                if chunk.isEmpty { break }
                pending += String(decoding: chunk, as: UTF8.self)
                guard let last = pending.lastIndex(of: "\n") else { continue }
                write(String(pending[...last]), prefix: prefix, to: FileHandle.standardError)
                pending = String(pending[pending.index(after: last)...])
            }
            if !pending.isEmpty { write(pending, prefix: prefix, to: FileHandle.standardError) }
        }
        Thread.detachNewThread {
            process.waitUntilExit()
            events.yield(.exited(index, process.terminationStatus))
        }
        return ClusterMember(node: node, process: process)
    }

    /// Asks the node to stop gracefully (GOAWAY, drain, flush).
    func terminate() { kill(pid, SIGTERM) }

    /// Stops the node now.
    func kill9() { kill(pid, SIGKILL) }

    /// Writes the lines with `prefix`; a failed write (the reader gone) drops them, so the
    /// node's pipe keeps draining.
    private static func write(_ text: String, prefix: String, to handle: FileHandle) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
        guard !lines.isEmpty else { return }
        let bytes = Array(lines.map { prefix + $0 + "\n" }.joined().utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(handle.fileDescriptor, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }

}

/// Watches for the death of this process's parent: the parent id changes when the parent exits
/// and the process is reparented (to init or a subreaper). Polled twice a second on a thread of
/// its own (PR_SET_PDEATHSIG would fire when the parent's spawning *thread* exits, which in a
/// multithreaded parent may be long before the parent does).
enum ParentWatch {
    static func start(_ gone: @escaping @Sendable () -> Void) {
        let parent = getppid()
        Thread.detachNewThread {
            while getppid() == parent { usleep(500_000) }
            gone()
        }
    }
}
