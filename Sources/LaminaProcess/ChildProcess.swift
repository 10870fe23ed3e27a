import CLaminaSpawn
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, with the part of Foundation's `Process` API the
/// project uses. Foundation's `Process.run()` on Linux crashed (memcpy inside `run`) in loaded
/// test runs, also one launch at a time; this starts children without it:
///
/// - the child gets only its three standard streams (no socket, store or other child's pipe
///   of this process), no blocked signal and every signal at its default action (the threads
///   async code runs on block SIGTERM and SIGINT, which a child would otherwise inherit);
/// - one thread per child waits for it (`waitpid`), then sets `terminationStatus`, wakes
///   `waitUntilExit()` and calls `terminationHandler`.
public final class ChildProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String] = []
    /// nil: this process's environment.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `Pipe`, a `FileHandle`, or nil (/dev/null).
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?
    /// Called on the waiting thread once the child has exited.
    public var terminationHandler: (@Sendable (ChildProcess) -> Void)?

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var pid: pid_t = 0
    private var exited = false
    private var status: Int32 = 0

    public init() {}

    /// The child's pid; 0 before `run()`.
    public var processIdentifier: Int32 { condition.withLock { pid } }
    /// Started and not yet exited.
    public var isRunning: Bool { condition.withLock { pid != 0 && !exited } }
    /// The exit code, or the signal that ended the child (as Foundation's `Process` reports it).
    public var terminationStatus: Int32 { condition.withLock { status } }

    /// Starts the child. The parent's copies of the child's ends of any `Pipe` are closed, so
    /// reading a `standardOutput` pipe ends when the child (and its own children) close it.
    public func run() throws {
        guard let executableURL else { throw POSIXError(.ENOENT) }
        let argv = ([executableURL.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            for p in argv { free(p) }
            for p in envp ?? [] { free(p) }
        }
        var child: pid_t = 0
        let rc = argv.withUnsafeBufferPointer { a in
            (envp ?? []).withUnsafeBufferPointer { e in
                lamina_spawn(
                    &child, executableURL.path, a.baseAddress, envp == nil ? nil : e.baseAddress,
                    currentDirectoryURL?.path,
                    Self.fd(standardInput, reading: true), Self.fd(standardOutput, reading: false),
                    Self.fd(standardError, reading: false))
            }
        }
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        for (stream, reading) in [(standardInput, true), (standardOutput, false), (standardError, false)] {
            guard let pipe = stream as? Pipe else { continue }
            try? (reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting).close()
        }
        let started = child
        condition.withLock { pid = started }
        let thread = Thread { [self] in waitForExit(started) }
        thread.name = "lamina.child.\(started)"
        thread.start()
    }

    /// Sends SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// Sends `number` to the child while it runs.
    public func signal(_ number: Int32) {
        condition.withLock {
            if pid != 0, !exited { kill(pid, number) }
        }
    }

    /// Returns once the child has exited (at once if it has, or was never started).
    public func waitUntilExit() {
        condition.withLock {
            while pid != 0 && !exited { condition.wait() }
        }
    }

    private func waitForExit(_ child: pid_t) {
        var raw: Int32 = 0
        while waitpid(child, &raw, 0) < 0 {
            guard errno == EINTR else { break }
        }
        // WIFEXITED: the low 7 bits are 0; then the code is bits 8–15, else the signal is the low 7.
        let code = raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
        let handler = condition.withLock { () -> (@Sendable (ChildProcess) -> Void)? in
            status = code
            exited = true
            condition.broadcast()
            return terminationHandler
        }
        handler?(self)
    }

    /// The descriptor the child gets for one standard stream.
    private static func fd(_ stream: Any?, reading: Bool) -> Int32 {
        switch stream {
        case let pipe as Pipe:
            reading ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle: handle.fileDescriptor
        default: -1
        }
    }
}
