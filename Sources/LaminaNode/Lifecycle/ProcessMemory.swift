#if canImport(Glibc)
    import Glibc
#endif

/// Process-wide allocator settings a node applies once at start, before its threads run.
public enum ProcessMemory {
    /// Limits glibc's malloc arenas to `arenas` (0: one per core, at least 2). Returns the
    /// limit applied, or nil where the C library has no such setting.
    @discardableResult
    public static func limitMallocArenas(_ arenas: Int, cores: Int) -> Int? {
        let limit = arenas > 0 ? arenas : max(2, cores)
        #if canImport(Glibc)
            // `mallopt` and `M_ARENA_MAX` (malloc.h) are not in Swift's Glibc module.
            typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
            let mArenaMax: Int32 = -8
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return nil }
            return unsafeBitCast(symbol, to: Mallopt.self)(mArenaMax, Int32(limit)) == 1 ? limit : nil
        #else
            return nil
        #endif
    }
}
