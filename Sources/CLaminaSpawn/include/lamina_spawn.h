#ifndef LAMINA_SPAWN_H
#define LAMINA_SPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL: this process's environment) in `cwd` (NULL:
/// this one's), its standard input, output and error on `in_fd`, `out_fd`, `err_fd` (-1:
/// /dev/null), no other descriptor inherited, no signal blocked and every signal at its
/// default action. Returns 0 and sets `*pid`, or an errno value.
int lamina_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *cwd,
                 int in_fd, int out_fd, int err_fd);

#endif
