#ifndef HABITFLOW_CLIBCRYPT_SHIM_H
#define HABITFLOW_CLIBCRYPT_SHIM_H

#include <crypt.h>

#endif
