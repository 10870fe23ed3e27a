import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Starts child processes: one at a time across the whole process, with no signal blocked.
///
/// - Foundation's `Process.run()` on Linux crashed (memcpy in `run`) while several test suites
///   launched processes at once; the lock is a file lock (each call opens the file anew, so
///   threads of one process exclude each other too, and test targets that are separate modules
///   in one bundle share it).
/// - A child inherits the spawning thread's signal mask, and the threads async code runs on
///   (libdispatch workers) block SIGTERM, SIGINT, SIGHUP, SIGUSR1/2, so a child started from
///   them could not be stopped by SIGTERM (Mosquitto, lamina-node's graceful shutdown).
public enum ProcessLaunch {
    public static func run(_ process: Process) throws {
        let fd = open(NSTemporaryDirectory() + "/lamina-process-launch.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 { flock(fd, LOCK_EX) }
        defer { if fd >= 0 { flock(fd, LOCK_UN); close(fd) } }
        var empty = sigset_t(), saved = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try process.run()
    }
}
