#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <string.h>

/* libmicrohttpd decodes %XX escapes of the path and of query arguments in place, so an encoded NUL
 * ended the text early: "/v1/webhooks/<id>%00/deliveries" reached the router as
 * "/v1/webhooks/<id>", and a DELETE meant for the sub-route deleted the webhook. Text holding %00
 * is left as it came (it then names no route, id or code, and is refused as such); any other text is
 * decoded by libmicrohttpd's own MHD_http_unescape. */
static inline size_t
cmicrohttpd_unescape(void *cls, struct MHD_Connection *connection, char *s)
{
  (void) cls;
  (void) connection;
  for (const char *p = strchr(s, '%'); p != NULL; p = strchr(p + 1, '%'))
    if (p[1] == '0' && p[2] == '0') return strlen(s);
  return MHD_http_unescape(s);
}

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

/* Writes a socket address's IP address as text into buf (empty when it is neither IPv4 nor IPv6). */
static inline void
cmicrohttpd_sockaddr_ip(const struct sockaddr *sa, char *buf, size_t len)
{
  buf[0] = '\0';
  if (sa == NULL) return;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, buf, (socklen_t) len);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, buf, (socklen_t) len);
}

/* MHD_get_connection_info is variadic too. Writes the client's IP address as text into buf
 * (empty when unknown). */
static inline void
cmicrohttpd_client_ip(struct MHD_Connection *connection, char *buf, size_t len)
{
  buf[0] = '\0';
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == NULL) return;
  cmicrohttpd_sockaddr_ip(info->client_addr, buf, len);
}

/* The connection's socket (-1 if unknown). */
static inline int
cmicrohttpd_connection_fd(struct MHD_Connection *connection)
{
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info == NULL ? -1 : info->connect_fd;
}

/* Swift cannot call C variadic functions, so MHD_start_daemon is wrapped here (a static inline
 * function in the system-library header is compiled by the Swift compiler's embedded Clang).
 * A daemon with no thread of its own (its loop runs it with MHD_run) on a listening socket its
 * caller made and shares with the other loops' daemons. */
static inline struct MHD_Daemon *
cmicrohttpd_start_on(unsigned int flags, int listen_socket,
                     unsigned int connection_limit, unsigned int connection_timeout_seconds,
                     size_t connection_memory_bytes,
                     MHD_AccessHandlerCallback dh, void *dh_cls,
                     MHD_RequestCompletedCallback done, void *done_cls,
                     MHD_AcceptPolicyCallback apc, void *apc_cls,
                     MHD_NotifyConnectionCallback notify, void *notify_cls)
{
  return MHD_start_daemon(flags, 0, apc, apc_cls, dh, dh_cls,
                          MHD_OPTION_LISTEN_SOCKET, (MHD_socket) listen_socket,
                          MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                          MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                          MHD_OPTION_NOTIFY_COMPLETED, done, done_cls,
                          MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
                          MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_bytes,
                          MHD_OPTION_UNESCAPE_CALLBACK, cmicrohttpd_unescape, NULL,
                          MHD_OPTION_END);
}

/* MHD_get_daemon_info is variadic too: the daemon's epoll descriptor (-1 if none). */
static inline int
cmicrohttpd_epoll_fd(struct MHD_Daemon *daemon)
{
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
  return info == NULL ? -1 : info->epoll_fd;
}

/* Milliseconds until the daemon needs MHD_run for a timeout, at most `cap`. */
static inline int
cmicrohttpd_timeout_ms(struct MHD_Daemon *daemon, int cap)
{
  MHD_UNSIGNED_LONG_LONG t = 0;
  if (MHD_get_timeout(daemon, &t) != MHD_YES) return cap;
  return t < (MHD_UNSIGNED_LONG_LONG) cap ? (int) t : cap;
}

#include <sys/prctl.h>

/* Names the calling thread (at most 15 characters shown): what `top -H` and `perf` print. */
static inline void
cmicrohttpd_name_thread(const char *name)
{
  prctl(PR_SET_NAME, name, 0, 0, 0);
}
