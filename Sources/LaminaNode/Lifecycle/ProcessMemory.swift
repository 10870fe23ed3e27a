#if canImport(Glibc)
    import Glibc
#endif

/// Process-wide allocator settings a node applies once at start, before its threads run.
public enum ProcessMemory {
    /// The heap allocator of this process: `jemalloc <version> (<options in effect>)` when the
    /// executable links jemalloc in place of glibc's malloc (`lamina-node` does:
    /// Server/RESOURCES.md §14), else `glibc`.
    public static var allocator: String {
        guard let version = jemallocVersion else { return "glibc" }
        let arenas = jemalloc("opt.narenas", as: UInt32.self).map { "narenas=\($0)" }
        let percpu = jemalloc("opt.percpu_arena", as: UnsafePointer<CChar>?.self).flatMap { $0 }
            .map { "percpu_arena=\(String(cString: $0))" }
        let decay = jemalloc("opt.dirty_decay_ms", as: Int.self).map { "dirty_decay_ms=\($0)" }
        return "jemalloc \(version) (\([arenas, percpu, decay].compactMap { $0 }.joined(separator: " ")))"
    }

    /// jemalloc's version when the process runs on jemalloc, else nil.
    public static var jemallocVersion: String? {
        jemalloc("version", as: UnsafePointer<CChar>?.self).flatMap { $0 }.map { String(cString: $0) }
    }

    /// Reads jemalloc's `mallctl` value `name` as a `T`; nil when the process does not run on
    /// jemalloc or the name is unknown. `mallctl` is looked up, not linked, so that only the
    /// executable links jemalloc (tests and tools keep glibc's malloc).
    private static func jemalloc<T>(_ name: String, as type: T.Type) -> T? {
        #if canImport(Glibc)
            // `mallctl(name, oldp, oldlenp, newp, newlen)`.
            typealias Mallctl =
                @convention(c) (
                    UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?,
                    UnsafeMutableRawPointer?, Int
                ) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallctl") else { return nil }
            let value = UnsafeMutableRawPointer.allocate(
                byteCount: MemoryLayout<T>.size, alignment: MemoryLayout<T>.alignment)
            defer { value.deallocate() }
            var length = MemoryLayout<T>.size
            guard unsafeBitCast(symbol, to: Mallctl.self)(name, value, &length, nil, 0) == 0,
                length == MemoryLayout<T>.size
            else { return nil }
            return value.load(as: T.self)
        #else
            return nil
        #endif
    }

    /// Limits glibc's malloc arenas to `arenas` (0: one per core, at least 2). Returns the
    /// limit applied, or nil where it does not apply: a C library without the setting, or a
    /// process on jemalloc (which sizes its own arenas when it starts, before any setting is
    /// read; `MALLOC_CONF=narenas:N` in the environment sets them).
    @discardableResult
    public static func limitMallocArenas(_ arenas: Int, cores: Int) -> Int? {
        let limit = arenas > 0 ? arenas : max(2, cores)
        #if canImport(Glibc)
            guard jemallocVersion == nil else { return nil }
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
