#ifndef LAMINA_C_ALLOCATION_COUNTER_H
#define LAMINA_C_ALLOCATION_COUNTER_H

#include <stdint.h>

/// Heap-allocation counting for lamina-bench only: this target replaces malloc, calloc,
/// realloc, free and the aligned allocators of the process it is linked into (glibc),
/// forwarding to glibc's own entry points and counting while counting is enabled.

/// 1 when the replacement allocator is compiled in (Linux with glibc), 0 elsewhere.
int lamina_allocation_counter_available(void);
/// Starts counting (counters keep their values; reset them first).
void lamina_allocation_counter_enable(void);
/// Stops counting.
void lamina_allocation_counter_disable(void);
/// Sets all counters to zero.
void lamina_allocation_counter_reset(void);
/// Allocations (malloc, calloc, realloc, aligned allocations) counted so far.
int64_t lamina_allocation_counter_allocations(void);
/// Bytes requested by the counted allocations.
int64_t lamina_allocation_counter_bytes(void);
/// Frees of non-null pointers counted so far.
int64_t lamina_allocation_counter_frees(void);

#endif
