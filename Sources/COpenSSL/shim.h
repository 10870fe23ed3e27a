// Swift-callable wrappers for the OpenSSL 3 macros LaminaTransport uses.
// Only static inline one-liners: no logic lives here.
#ifndef LAMINA_COPENSSL_SHIM_H
#define LAMINA_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/rand.h>
#include <openssl/ec.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

static inline int lamina_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline int lamina_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
static inline int lamina_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}
static inline long lamina_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
static inline long lamina_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline int lamina_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
static inline uint64_t lamina_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t lamina_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t lamina_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline uint64_t lamina_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline long lamina_SSL_MODE_RELEASE_BUFFERS(void) { return SSL_MODE_RELEASE_BUFFERS; }
static inline long lamina_SSL_MODE_ENABLE_PARTIAL_WRITE(void) { return SSL_MODE_ENABLE_PARTIAL_WRITE; }
static inline long lamina_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER(void) { return SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER; }

static inline void lamina_BIO_set_retry_read(BIO *bio) { BIO_set_retry_read(bio); }
static inline void lamina_BIO_clear_retry_flags(BIO *bio) { BIO_clear_retry_flags(bio); }
static inline long lamina_BIO_get_mem_data(BIO *bio, char **out) { return BIO_get_mem_data(bio, out); }

static inline void lamina_OPENSSL_free(void *p) { OPENSSL_free(p); }

/// EVP_EC_gen is a variadic macro; Swift cannot call it.
static inline EVP_PKEY *lamina_EVP_EC_gen(const char *curve) { return EVP_EC_gen(curve); }

/// SHA-256 of one buffer on a context on the stack: EVP's one-shot allocates a context and
/// its provider state per call. The low-level calls are deprecated in 3.0, not removed.
static inline void lamina_SHA256_oneshot(const void *data, size_t length, unsigned char *out) {
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, data, length);
    SHA256_Final(out, &c);
#pragma clang diagnostic pop
}

#endif
