import Foundation
import LaminaClient

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One `lamina` process per user store: the SDK's store belongs to one client at a time
/// (a second writer would fail with "database is locked"). An advisory `flock` on
/// `<data>/user-<hash>.lock`, released when the process ends, however it ends.
public final class StoreLock: @unchecked Sendable {
    private let descriptor: Int32
    public let path: String

    /// Takes the lock of `user`'s store in `dataDirectory`, or throws `.storeInUse`.
    public init(location: StoreLocation) throws(CLIError) {
        let directory = location.dataDirectory
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw CLIError(
                .storeInUse, "cannot create the client data directory \(directory.path): \(error.localizedDescription)")
        }
        path = location.userDirectory.path + ".lock"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CLIError(.storeInUse, "cannot open the lock file \(path) (errno \(errno))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines)
            close(descriptor)
            throw CLIError(
                .storeInUse,
                "\(location.user)'s local store is in use by another lamina process\(holder.map { $0.isEmpty ? "" : " (pid \($0))" } ?? ""): one process per user store at a time; leave the other one, or pass --data DIR to act as another device of \(location.user)"
            )
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    deinit {
        _ = flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
