import LaminaNode
import Testing

@Suite struct ProcessMemoryTests {
    /// glibc takes the arena limit: one per core by default, at least 2, or the setting.
    @Test func mallocArenasAreLimitedToTheSettingOrOnePerCore() throws {
        #if canImport(Glibc)
            // The test process keeps glibc's malloc (only `lamina-node` links jemalloc).
            #expect(ProcessMemory.allocator == "glibc")
            #expect(ProcessMemory.limitMallocArenas(0, cores: 1) == 2)
            #expect(ProcessMemory.limitMallocArenas(0, cores: 6) == 6)
            #expect(ProcessMemory.limitMallocArenas(3, cores: 6) == 3)
        #endif
        var configuration = NodeServerConfiguration()
        configuration.mallocArenas = 65
        #expect(throws: (any Error).self) { try configuration.validate() }
        configuration.mallocArenas = 0
        try configuration.validate()
    }
}
