/*
 * The pod sandbox's process for the e2e cluster (what registry.k8s.io/pause
 * does): hold the pod's namespaces open, reap orphaned children when it is
 * PID 1 of a shared PID namespace, and exit 0 on SIGINT/SIGTERM.
 *
 * Built by hack/install-node.sh with `gcc -static -Os` and packed as an image
 * with this single file, so it needs no libc in the image.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("streamq-pause 1.0");
    return 0;
  }
  if (getpid() != 1) {
    fprintf(stderr, "warning: pause should be the first process of its namespace\n");
  }
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  sigemptyset(&on_stop.sa_mask);
  sigemptyset(&on_child.sa_mask);
  if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
      sigaction(SIGCHLD, &on_child, NULL) < 0) {
    perror("sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
