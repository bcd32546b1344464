#ifndef HABITFLOW_CLIBPQ_SHIM_H
#define HABITFLOW_CLIBPQ_SHIM_H

#include <libpq-fe.h>

// The Postgres layer waits for many connections' sockets on one thread (libpq's non-blocking API); Swift's Glibc
// module does not export epoll or eventfd.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

// Names the calling thread (at most 15 characters show), so profiles and tests can tell the poller thread apart.
// prctl is variadic, which Swift cannot call.
static inline int habitflow_name_current_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

#endif
