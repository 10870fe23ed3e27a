#include "lamina_allocator.h"

// jemalloc's options for lamina-node, read before the first allocation (Server/RESOURCES.md §14):
// - percpu_arena:percpu: one arena per CPU (as the node limits glibc's arenas to one per core),
//   not jemalloc's default of four per CPU, whose freed pages each stay resident apart;
// - dirty_decay_ms:1000: pages freed are returned to the kernel within about a second, not
//   ten, so a burst of large answers (32 history readers) does not stay in the resident set.
const char *malloc_conf = "percpu_arena:percpu,dirty_decay_ms:1000";
