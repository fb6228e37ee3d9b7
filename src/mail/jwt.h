/*
 * jwt.h: the signed JSON Web Tokens (RFC 7519, JWS compact form of RFC
 * 7515) that OAuth's app-only grants send (mail/oauth.h): the client
 * assertion of RFC 7523 section 2.2 (Microsoft Entra ID's certificate
 * credential) and the JWT bearer grant of RFC 7523 section 2.1 (a
 * Google service account).  RS256 only (RSASSA-PKCS1-v1_5 with
 * SHA-256, RFC 7518 3.3): what both providers take.  OpenSSL's libcrypto
 * signs; no JWT library.
 *
 * Trusts: the key and certificate files only as OpenSSL parses them.
 * Config keys: none (the caller's files).
 */
#ifndef WEIR_JWT_H
#define WEIR_JWT_H

#include <stddef.h>

#include <openssl/evp.h>

#include "lib/buf.h"

/* base64url without padding (RFC 4648 5, RFC 7515 2) of in[0..n) into
 * out, which holds 4 * ((n + 2) / 3) + 1 bytes. */
void b64url_encode(const unsigned char *in, size_t n, char *out);

/* The RSA private key in the PEM text pem[0..n) (PKCS#8 or PKCS#1, not
 * encrypted); what: its name for messages.  NULL with why in err. */
EVP_PKEY *jwt_key_pem(const char *pem, size_t n, const char *what, struct buf *err);

/* The certificate in the PEM file path: its thumbprints, base64url, as
 * the JWS header's x5t (SHA-1 of the DER) and x5t#S256 (SHA-256), into
 * x5t[32] and x5t256[48]; key must be its private key.  0, or -1 with
 * why in err. */
int jwt_cert_thumbprints(const char *path, EVP_PKEY *key, char *x5t, char *x5t256,
    struct buf *err);

/* header.claims.signature, RS256 with key, appended to out (reserve it:
 * the caller wipes it).  header and claims are JSON objects.  0, or -1
 * with why in err. */
int jwt_sign(EVP_PKEY *key, const char *header, const char *claims, struct buf *out,
    struct buf *err);

#endif
