#ifndef HABITFLOW_COPENSSL_SHIM_H
#define HABITFLOW_COPENSSL_SHIM_H

#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

/* Selection masks for EVP_PKEY_fromdata: composite macros that Swift does not import. */
static inline int habitflow_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

/* HMAC-SHA-256 with the key's padded blocks hashed once, when the key is made: HMAC() fetches the algorithm from the
 * provider and re-keys on every call, several times the cost of the two hashes. The low-level SHA-256 calls are
 * deprecated in OpenSSL 3 but kept; they are the only way to copy a digest's state as a plain value. */
typedef struct {
    SHA256_CTX inner;
    SHA256_CTX outer;
} habitflow_hmac_sha256_key;

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static inline void habitflow_hmac_sha256_key_init(
    habitflow_hmac_sha256_key *key, const unsigned char *secret, size_t length) {
    unsigned char block[SHA256_CBLOCK] = {0};
    if (length > SHA256_CBLOCK) {
        SHA256_CTX hashed;
        SHA256_Init(&hashed);
        SHA256_Update(&hashed, secret, length);
        SHA256_Final(block, &hashed);
    } else if (length > 0) {
        memcpy(block, secret, length);
    }
    unsigned char pad[SHA256_CBLOCK];
    for (int i = 0; i < SHA256_CBLOCK; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&key->inner);
    SHA256_Update(&key->inner, pad, SHA256_CBLOCK);
    for (int i = 0; i < SHA256_CBLOCK; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&key->outer);
    SHA256_Update(&key->outer, pad, SHA256_CBLOCK);
    OPENSSL_cleanse(block, sizeof(block));
    OPENSSL_cleanse(pad, sizeof(pad));
}

static inline void habitflow_hmac_sha256(
    const habitflow_hmac_sha256_key *key, const unsigned char *data, size_t length,
    unsigned char out[SHA256_DIGEST_LENGTH]) {
    SHA256_CTX context = key->inner;
    unsigned char inner[SHA256_DIGEST_LENGTH];
    SHA256_Update(&context, data, length);
    SHA256_Final(inner, &context);
    context = key->outer;
    SHA256_Update(&context, inner, SHA256_DIGEST_LENGTH);
    SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof(context));
}
#pragma clang diagnostic pop

#endif
