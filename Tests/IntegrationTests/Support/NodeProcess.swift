import Foundation
import LaminaProcess
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// A built executable of the package (debug, next to the test bundle).
enum BuiltProduct {
    static func url(_ name: String) throws -> URL {
        let candidates = [
            Fixtures.packageRoot.appendingPathComponent(".build/debug/\(name)"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name),
        ]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw SyncTestTimeout(
                waitingFor: "a built \(name) (run `swift build` first); looked at \(candidates.map(\.path))")
        }
        return found
    }
}

/// `lamina-node` running as its own process in `directory`, its output collected.
final class NodeProcess: Sendable {
    let process: ChildProcess
    let syncPort: Int
    let adminPort: Int
    let directory: URL
    private let output = NIOLockedValueBox("")
    private let errors = NIOLockedValueBox("")
    private let exited: PromiseBox<Int32>
    /// Completed when the node's stderr reached its end (everything it logged is in `logged`).
    private let errorsEnded: PromiseBox<Void>
    private let serving: PromiseBox<Void>

    /// Starts the node on free ports with `arguments` added, and waits until it serves; in
    /// `namespace` when given (`ip netns exec`, which becomes the node: the pid is the node's).
    static func start(
        in directory: URL, arguments: [String] = [], environment: [String: String] = [:],
        namespace: NetworkNamespace? = nil
    ) async throws -> NodeProcess {
        let node = try NodeProcess(
            directory: directory, arguments: arguments, environment: environment, namespace: namespace)
        try await node.serving.promise.futureResult.get()
        return node
    }

    /// `environment` is added to this process's.
    private init(directory: URL, arguments: [String], environment: [String: String], namespace: NetworkNamespace?)
        throws
    {
        self.directory = directory
        syncPort = try ExecutableTests.freePort()
        adminPort = try ExecutableTests.freePort()
        let process = ChildProcess()
        let binary = try BuiltProduct.url("lamina-node")
        let all = ["--listen", "127.0.0.1:\(syncPort)", "--admin", "127.0.0.1:\(adminPort)"] + arguments
        if let namespace {
            process.executableURL = URL(fileURLWithPath: NetworkNamespace.ip)
            process.arguments = namespace.command(binary.path, all)
        } else {
            process.executableURL = binary
            process.arguments = all
        }
        process.currentDirectoryURL = directory
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        self.process = process
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        let loop = Fixtures.group.next()
        exited = PromiseBox(loop.makePromise(of: Int32.self))
        errorsEnded = PromiseBox(loop.makePromise(of: Void.self))
        serving = PromiseBox(loop.makePromise(of: Void.self))
        try process.run()
        // Plain threads (no dispatch sources): two read the output to EOF, one waits for the exit.
        let (output, errors, serving, exited, errorsEnded) = (output, errors, serving, exited, errorsEnded)
        Thread.detachNewThread {
            let reader = stdout.fileHandleForReading
            while true {
                let chunk = PipeReading.next(reader)
                if chunk.isEmpty { break }
                let text = output.withLockedValue {
                    $0 += String(decoding: chunk, as: UTF8.self)
                    return $0
                }
                if text.contains("is serving") { serving.promise.succeed(()) }
            }
            serving.promise.fail(SyncTestTimeout(waitingFor: "the node to serve (its output ended)"))
        }
        Thread.detachNewThread {
            let reader = stderr.fileHandleForReading
            while true {
                let chunk = PipeReading.next(reader)
                if chunk.isEmpty { break }
                errors.withLockedValue { $0 += String(decoding: chunk, as: UTF8.self) }
            }
            errorsEnded.promise.succeed(())
        }
        Thread.detachNewThread {
            process.waitUntilExit()
            exited.promise.succeed(process.terminationStatus)
        }
        loop.scheduleTask(in: .seconds(60)) { serving.promise.fail(SyncTestTimeout(waitingFor: "the welcome text")) }
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    /// What the node printed on stdout so far.
    var printed: String { output.withLockedValue { $0 } }
    /// What the node logged on stderr so far.
    var logged: String { errors.withLockedValue { $0 } }
    /// The node's data directory (zero configuration: `.lamina` in its working directory).
    var dataDirectory: URL { directory.appendingPathComponent(".lamina") }

    /// Sends `signal` and waits for the exit status, and for `logged` to hold everything the
    /// node wrote on stderr (the exit can be seen before its last lines are read from the pipe).
    func stop(with signal: Int32 = SIGTERM) async throws -> Int32 {
        kill(pid, signal)
        let status = try await exited.promise.futureResult.get()
        try await errorsEnded.promise.futureResult.get()
        return status
    }

    deinit { if process.isRunning { process.terminate() } }
}
