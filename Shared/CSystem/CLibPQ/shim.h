#ifndef HABITFLOW_CLIBPQ_SHIM_H
#define HABITFLOW_CLIBPQ_SHIM_H

#include <libpq-fe.h>

#endif
