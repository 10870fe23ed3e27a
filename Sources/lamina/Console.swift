import ArgumentParser
import Foundation
import LaminaCLI

/// Line output, written at once, unbuffered (stdout is often a pipe: a test or `| grep`).
enum Console {
    private static let lock = NSLock()

    /// A line on standard output.
    static func out(_ line: String) {
        lock.withLock {
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }

    /// A line on standard error (status, hints, errors).
    static func err(_ line: String) {
        lock.withLock {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }
}

/// Runs a command's body: a `CLIError` is printed as `lamina: error [code]: reason` and
/// ends the process with status 1 (ArgumentParser's own usage errors keep theirs).
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as CLIError {
        Console.err("lamina: \(error)")
        throw ExitCode.failure
    }
}
