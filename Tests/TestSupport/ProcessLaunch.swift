import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Starts child processes one at a time across the whole test bundle: Foundation's
/// `Process.run()` on Linux crashed (memcpy in `run`) while several suites launched processes
/// at once. The test targets are separate modules in one process and share this helper; the
/// lock is a file lock (each call opens the file anew, so threads exclude each other too).
public enum ProcessLaunch {
    public static func run(_ process: Process) throws {
        let fd = open(NSTemporaryDirectory() + "/lamina-tests-process-launch.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 { flock(fd, LOCK_EX) }
        defer { if fd >= 0 { flock(fd, LOCK_UN); close(fd) } }
        try process.run()
    }
}
