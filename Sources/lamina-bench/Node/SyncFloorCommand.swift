import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `lamina-bench sync-floor`: what one synced commit costs this machine before any database
/// work, the floor under every durable write path.
struct SyncFloorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-floor",
        abstract: "CPU and wall time of one synced append (pwrite + fdatasync) on this machine's disk.",
        discussion: """
            Appends --pages pages of 4,120 bytes (a SQLite WAL frame: 24-byte header + 4 KiB page) to a file in \
            --directory, then fdatasync, --count times; and the same appends without the sync. Prints one line \
            per page count: CPU µs (of the calling thread, user + system) and wall µs per synced append, and CPU µs \
            per unsynced append. A node that acknowledges only synced commits pays the synced figure once per \
            group commit (`commits=` in the `rate` and `closed` lines), so commits × cpu_us_per_sync over the \
            messages is the part of its CPU per message that durability alone costs here.
            """)

    @Option(help: "Directory for the scratch file (default: where nodes under load keep their data).") var directory:
        String?
    @Option(help: "Page counts to measure, comma separated.") var pages = "1,8"
    @Option(help: "Appends per measurement.") var count = 2_000

    static let frameBytes = 4_120
    static let maxPages = 256

    func validate() throws {
        guard (1...1_000_000).contains(count) else { throw ValidationError("--count must be 1...1,000,000") }
        guard Self.pageCounts(pages)?.isEmpty == false else {
            throw ValidationError("--pages must be page counts 1...\(Self.maxPages), comma separated")
        }
    }

    static func pageCounts(_ text: String) -> [Int]? {
        let list = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard list.allSatisfy({ $0.map { (1...maxPages).contains($0) } ?? false }) else { return nil }
        return list.compactMap { $0 }
    }

    func run() async throws {
        let folder = try directory ?? BenchSupport.temporaryDirectory()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/sync-floor-\(UUID().uuidString.prefix(8))"
        let fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0o644)
        guard fd >= 0 else { throw BenchFailure("cannot create \(path): errno \(errno)") }
        defer {
            close(fd)
            unlink(path)
        }
        let block = [UInt8](repeating: 7, count: Self.frameBytes * Self.maxPages)
        for pageCount in Self.pageCounts(pages) ?? [] {
            let synced = try Self.measure(fd: fd, block: block, pages: pageCount, count: count, sync: true)
            let unsynced = try Self.measure(fd: fd, block: block, pages: pageCount, count: count, sync: false)
            print(
                String(
                    format:
                        "sync-floor: pages=%d bytes=%d count=%d cpu_us_per_sync=%.1f wall_us_per_sync=%.1f cpu_us_per_unsynced_append=%.1f directory=%@",
                    pageCount, pageCount * Self.frameBytes, count, synced.cpu, synced.wall, unsynced.cpu, folder))
        }
    }

    /// Mean CPU and wall µs per append of `pages` frames (and its fdatasync with `sync`). The
    /// file wraps at 8,000 frames so it stays the size of a busy WAL.
    static func measure(fd: Int32, block: [UInt8], pages: Int, count: Int, sync: Bool) throws -> (
        cpu: Double, wall: Double
    ) {
        let wrap = 8_000 * frameBytes
        var offset = 0
        let cpu0 = threadCPU()
        let wall0 = monotonicNanos()
        for _ in 0..<count {
            let bytes = pages * frameBytes
            let written = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, bytes, off_t(offset)) }
            guard written == bytes else {
                throw BenchFailure("pwrite wrote \(written) of \(bytes) bytes: errno \(errno)")
            }
            offset = offset + bytes >= wrap ? 0 : offset + bytes
            if sync, fdatasync(fd) != 0 { throw BenchFailure("fdatasync failed: errno \(errno)") }
        }
        let cpu = threadCPU() - cpu0
        let wall = Double(monotonicNanos() - wall0) / 1e3
        return (cpu * 1e6 / Double(count), wall / Double(count))
    }

    /// CPU time of the calling thread (user + system), seconds.
    static func threadCPU() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
