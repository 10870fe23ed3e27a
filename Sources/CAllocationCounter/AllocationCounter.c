// Replacement allocator entry points that count calls. Linked into the lamina-bench
// executable only: an executable's definitions of malloc & co. take precedence over
// libc's for every shared library of the process (ELF symbol interposition), so the
// Swift runtime's and Foundation's allocations are counted too. Each entry point
// forwards to glibc's exported __libc_* implementation, which avoids dlsym and its
// own allocations. Counters are relaxed atomics; counting is off until enabled.
#include "CAllocationCounter.h"

#if defined(__linux__) && defined(__GLIBC__)

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);

static atomic_bool counting = false;
static atomic_llong allocations = 0;
static atomic_llong allocatedBytes = 0;
static atomic_llong frees = 0;

static inline void countAllocation(size_t size) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&allocatedBytes, (long long)size, memory_order_relaxed);
    }
}

static inline void countFree(void *pointer) {
    if (pointer != NULL && atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    }
}

void *malloc(size_t size) {
    countAllocation(size);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    countAllocation(count * size);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    countAllocation(size);
    return __libc_realloc(pointer, size);
}

void free(void *pointer) {
    countFree(pointer);
    __libc_free(pointer);
}

void *memalign(size_t alignment, size_t size) {
    countAllocation(size);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    countAllocation(size);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) { return EINVAL; }
    countAllocation(size);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) { return ENOMEM; }
    *result = pointer;
    return 0;
}

int lamina_allocation_counter_available(void) { return 1; }
void lamina_allocation_counter_enable(void) { atomic_store(&counting, true); }
void lamina_allocation_counter_disable(void) { atomic_store(&counting, false); }

void lamina_allocation_counter_reset(void) {
    atomic_store(&allocations, 0);
    atomic_store(&allocatedBytes, 0);
    atomic_store(&frees, 0);
}

int64_t lamina_allocation_counter_allocations(void) { return atomic_load(&allocations); }
int64_t lamina_allocation_counter_bytes(void) { return atomic_load(&allocatedBytes); }
int64_t lamina_allocation_counter_frees(void) { return atomic_load(&frees); }

#else

int lamina_allocation_counter_available(void) { return 0; }
void lamina_allocation_counter_enable(void) {}
void lamina_allocation_counter_disable(void) {}
void lamina_allocation_counter_reset(void) {}
int64_t lamina_allocation_counter_allocations(void) { return 0; }
int64_t lamina_allocation_counter_bytes(void) { return 0; }
int64_t lamina_allocation_counter_frees(void) { return 0; }

#endif
