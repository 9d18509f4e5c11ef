/*
 * TEST-ONLY shim for the private Grid Engine cell of start-sge.sh: sge_qmaster and sge_execd bind
 * their listening sockets to the wildcard address and Grid Engine has no setting to change that,
 * while every server a test of this project starts must listen on loopback only. Loaded with
 * LD_PRELOAD into those two daemons, it turns a bind() to INADDR_ANY into 127.0.0.1 and one to
 * in6addr_any into ::1; every other bind() passes unchanged. It removes LD_PRELOAD from the
 * environment once loaded, so the shepherds and jobs the execd starts never carry it.
 * Never for a production cell: there, a firewall or the host's own addresses decide.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

__attribute__((constructor)) static void forget_preload(void) { unsetenv("LD_PRELOAD"); }

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real;
  if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (!real) { errno = ENOSYS; return -1; }
  if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in in;
    memcpy(&in, addr, sizeof in);
    if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
      in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real(fd, (const struct sockaddr *)&in, sizeof in);
    }
  } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6;
    memcpy(&in6, addr, sizeof in6);
    if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
      in6.sin6_addr = in6addr_loopback;
      return real(fd, (const struct sockaddr *)&in6, sizeof in6);
    }
  }
  return real(fd, addr, len);
}
