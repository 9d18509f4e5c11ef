#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static int (*real)(int, const struct sockaddr *, socklen_t);
  if (!real) real = dlsym(RTLD_NEXT, "bind");
  if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 a; memcpy(&a, addr, sizeof a);
    if (!memcmp(&a.sin6_addr, &in6addr_any, sizeof a.sin6_addr)) { memset(&a.sin6_addr, 0, 16); a.sin6_addr.s6_addr[10] = 0xff; a.sin6_addr.s6_addr[11] = 0xff; a.sin6_addr.s6_addr[12] = 127; a.sin6_addr.s6_addr[15] = 1; return real(fd, (struct sockaddr *)&a, sizeof a); }
  }
  if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in a; memcpy(&a, addr, sizeof a);
    if (a.sin_addr.s_addr == htonl(INADDR_ANY)) { a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); return real(fd, (struct sockaddr *)&a, sizeof a); }
  }
  return real(fd, addr, len);
}
