#ifndef HABITFLOW_CNGHTTP2_SHIM_H
#define HABITFLOW_CNGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>

#endif
