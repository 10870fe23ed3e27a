#ifndef LAMINA_ALLOCATOR_H
#define LAMINA_ALLOCATOR_H

/// The jemalloc options `lamina-node` starts with (jemalloc reads this program's
/// `malloc_conf` when it initializes; `MALLOC_CONF` in the environment overrides them).
/// See Server/RESOURCES.md §14.
extern const char *malloc_conf;

#endif
