import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Directories a test or benchmark process makes for its own data (node stores, certificates,
/// client databases), removed with everything in them when the process exits. Test and bench
/// processes start many nodes; without this their data directories stayed in the temporary
/// directory after every run (a suite run left ~760 of them, up to 130 MB each).
///
/// Set `LAMINA_KEEP_SCRATCH=1` to keep them (to look at a failed run's stores).
public enum ScratchDirectory {
    private static let made = Mutex<[String]?>(nil)

    /// A new directory `<temporary directory>/<prefix>-<pid>-<8 random hex digits>`, removed
    /// when this process exits through `exit` or the end of `main`.
    public static func make(_ prefix: String) -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))")
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            fatalError("cannot create scratch directory \(url.path): \(error)")
        }
        register(url.path)
        return url
    }

    /// Removes `path` when the process exits.
    private static func register(_ path: String) {
        let first = made.withLock { list -> Bool in
            if list == nil {
                list = [path]
                return true
            }
            list!.append(path)
            return false
        }
        if first { atexit { ScratchDirectory.removeAll() } }
    }

    /// Removes every registered directory (once; later calls find none).
    static func removeAll() {
        let paths = made.withLock { list -> [String] in
            defer { list = [] }
            return list ?? []
        }
        guard ProcessInfo.processInfo.environment["LAMINA_KEEP_SCRATCH"] != "1" else { return }
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }
}
