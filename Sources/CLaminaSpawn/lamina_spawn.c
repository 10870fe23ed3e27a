#define _GNU_SOURCE
#include "lamina_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

extern char **environ;

static int standard_stream(posix_spawn_file_actions_t *actions, int fd, int target, int flags) {
    if (fd < 0) return posix_spawn_file_actions_addopen(actions, target, "/dev/null", flags, 0);
    return posix_spawn_file_actions_adddup2(actions, fd, target);
}

int lamina_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *cwd,
                 int in_fd, int out_fd, int err_fd) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attributes);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return rc;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    if (rc == 0) rc = standard_stream(&actions, in_fd, 0, O_RDONLY);
    if (rc == 0) rc = standard_stream(&actions, out_fd, 1, O_WRONLY);
    if (rc == 0) rc = standard_stream(&actions, err_fd, 2, O_WRONLY);
    // Nothing else of this process (sockets, the store, other children's pipes) reaches the child.
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (rc == 0 && cwd != NULL) rc = posix_spawn_file_actions_addchdir_np(&actions, cwd);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attributes, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attributes, &all);
    if (rc == 0) rc = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (rc == 0) rc = posix_spawn(pid, path, &actions, &attributes, argv, envp != NULL ? envp : environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}
