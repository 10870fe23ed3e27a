import Foundation
import LaminaProcess

#if canImport(Glibc)
    import Glibc
#endif

struct CLITimeout: Error, CustomStringConvertible {
    var waitingFor: String
    var output: String
    var description: String { "timed out waiting for \(waitingFor); output so far:\n\(output)" }
}

/// The built `lamina` binary as a child process: its standard input is a pipe the test
/// writes (or closes), its standard output and error are collected; waits are on the
/// output itself (woken by every chunk read), each with a time limit.
final class CLIProcess: @unchecked Sendable {
    let process = ChildProcess()
    let name: String
    private let input = Pipe()
    private let lock = NSLock()
    private var stdoutText = ""
    private var stderrText = ""
    private var status: Int32?
    private var closedOutputs = 0
    private var nextWaiter = 0
    private var waiters: [Int: AsyncStream<Void>.Continuation] = [:]

    /// The binary `swift build` made, next to the test bundle (or in .build/debug).
    static func binary() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lamina"),
            packageRoot.appendingPathComponent(".build/debug/lamina"),
        ]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw CLITimeout(
                waitingFor: "a built lamina binary (run `swift build`)",
                output: candidates.map(\.path).joined(separator: "\n"))
        }
        return found
    }

    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    init(_ name: String, _ arguments: [String], in directory: URL) throws {
        self.name = name
        process.executableURL = try Self.binary()
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = input
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Plain threads: two read to EOF, one waits for the exit.
        for (pipe, isError) in [(out, false), (err, true)] {
            let handle = pipe.fileHandleForReading
            Thread.detachNewThread { [self] in
                while true {
                    let chunk = PipeReading.next(handle)
                    if chunk.isEmpty {
                        lock.withLock { closedOutputs += 1 }
                        wake()
                        break
                    }
                    let text = String(decoding: chunk, as: UTF8.self)
                    lock.withLock { if isError { stderrText += text } else { stdoutText += text } }
                    wake()
                }
            }
        }
        Thread.detachNewThread { [self] in
            process.waitUntilExit()
            lock.withLock { status = process.terminationStatus }
            wake()
        }
    }

    /// Runs to completion with `stdin` as its whole input; the exit status and output.
    static func run(
        _ name: String, _ arguments: [String], in directory: URL, stdin: String = "",
        timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let p = try CLIProcess(name, arguments, in: directory)
        p.write(stdin)
        p.closeInput()
        let status = try await p.exit(timeout: timeout)
        return (status, p.stdout, p.stderr)
    }

    var stdout: String { lock.withLock { stdoutText } }
    var stderr: String { lock.withLock { stderrText } }
    var output: String { lock.withLock { "--- \(name) stdout\n\(stdoutText)--- \(name) stderr\n\(stderrText)" } }

    func write(_ text: String) {
        guard !text.isEmpty else { return }
        try? input.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    func closeInput() { try? input.fileHandleForWriting.close() }

    /// Returns once standard output contains `text` (counting from the start).
    func waitFor(_ text: String, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("'\(text)' on \(name)'s output", timeout: timeout) { $0.stdout.contains(text) }
    }

    /// Returns once standard error contains `text`.
    func waitUntilStderr(_ text: String, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("'\(text)' on \(name)'s standard error", timeout: timeout) { $0.stderr.contains(text) }
    }

    /// Returns once `text` is on standard output `count` times.
    func waitFor(_ text: String, count: Int, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("\(count) × '\(text)' on \(name)'s output", timeout: timeout) {
            $0.stdout.components(separatedBy: text).count - 1 >= count
        }
    }

    /// The exit status, once the process has exited and all its output has been read.
    func exit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        try await waitUntil("\(name) to exit", timeout: timeout) { p in
            p.lock.withLock { p.status != nil && p.closedOutputs == 2 }
        }
        return lock.withLock { status! }
    }

    func interrupt() { if process.isRunning { kill(process.processIdentifier, SIGINT) } }

    func stop() { if process.isRunning { process.terminate() } }

    private func waitUntil(_ what: String, timeout: Duration, _ condition: @escaping @Sendable (CLIProcess) -> Bool)
        async throws
    {
        let wakeups = subscribe()  // before the first check: no chunk is missed
        if condition(self) { return }
        let met = await withTaskGroup(of: Bool.self) { group in
            group.addTask { [self] in
                for await _ in wakeups where condition(self) { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !met { throw CLITimeout(waitingFor: what, output: output) }
    }

    private func subscribe() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let token = lock.withLock { () -> Int in
            nextWaiter += 1
            waiters[nextWaiter] = continuation
            return nextWaiter
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.waiters.removeValue(forKey: token) }
        }
        return stream
    }

    private func wake() {
        for continuation in lock.withLock({ Array(waiters.values) }) { continuation.yield() }
    }
}
