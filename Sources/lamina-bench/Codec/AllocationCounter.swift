import CAllocationCounter

/// Counts heap allocations of this process (lamina-bench only) through the replacement
/// allocator in `CAllocationCounter`.
enum AllocationCounter {
    /// Whether allocations can be counted on this platform (Linux with glibc).
    static var isAvailable: Bool { lamina_allocation_counter_available() != 0 }

    /// Allocations made by `body`, divided by `per`. Run it single-threaded: other threads'
    /// allocations in the meantime count too.
    static func allocations(per count: Int, _ body: () -> Void) -> Double {
        lamina_allocation_counter_reset()
        lamina_allocation_counter_enable()
        body()
        lamina_allocation_counter_disable()
        return Double(lamina_allocation_counter_allocations()) / Double(count)
    }
}
