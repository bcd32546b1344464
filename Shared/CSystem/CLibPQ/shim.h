#ifndef HABITFLOW_CLIBPQ_SHIM_H
#define HABITFLOW_CLIBPQ_SHIM_H

#include <libpq-fe.h>

// The Postgres layer waits for many connections' sockets on one thread (libpq's non-blocking API); Swift's Glibc
// module does not export epoll or eventfd.
#include <sys/epoll.h>
#include <sys/eventfd.h>

#endif
