#ifndef HABITFLOW_CZLIB_SHIM_H
#define HABITFLOW_CZLIB_SHIM_H

#include <zlib.h>

// deflateInit2 and inflateInit2 are macros, which Swift cannot call.
static inline int habitflow_deflate_init_gzip(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}

// Raw deflate (RFC 1951: no zlib or gzip wrapper, negative windowBits), the data of a ZIP entry (method 8).
static inline int habitflow_deflate_init_raw(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}

static inline int habitflow_inflate_init_gzip(z_streamp stream) {
    return inflateInit2(stream, 15 + 16);
}

#endif
