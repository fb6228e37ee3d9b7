/*
 * jwt.c: RS256-signed JWTs with libcrypto; see jwt.h.
 *
 * Trusts: the files only as OpenSSL parses them.  Config keys: none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "lib/alloc.h"
#include "mail/jwt.h"

#define RSA_BITS_MIN 2048	/* what both providers ask of a key */

void
b64url_encode(const unsigned char *in, size_t n, char *out)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t i, k = 0;

	for (i = 0; i + 2 < n; i += 3) {
		out[k++] = a[in[i] >> 2];
		out[k++] = a[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		out[k++] = a[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
		out[k++] = a[in[i + 2] & 63];
	}
	if (n - i == 1) {
		out[k++] = a[in[i] >> 2];
		out[k++] = a[(in[i] & 3) << 4];
	} else if (n - i == 2) {
		out[k++] = a[in[i] >> 2];
		out[k++] = a[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
		out[k++] = a[(in[i + 1] & 15) << 2];
	}
	out[k] = '\0';
}

/* OpenSSL's first error, or what, into err. */
static void
ssl_why(struct buf *err, const char *what)
{
	unsigned long e = ERR_get_error();
	char s[256];

	if (e) {
		ERR_error_string_n(e, s, sizeof s);
		buf_printf(err, "%s (%s)", what, s);
	} else {
		buf_adds(err, what);
	}
	ERR_clear_error();
}

/* An encrypted key is refused, not prompted for. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf; (void)size; (void)rwflag; (void)u;
	return 0;
}

EVP_PKEY *
jwt_key_pem(const char *pem, size_t n, const char *what, struct buf *err)
{
	BIO *b = BIO_new_mem_buf(pem, (int)n);
	EVP_PKEY *k = NULL;

	if (b == NULL || n > (size_t)1 << 20) {
		buf_printf(err, "%s: out of memory, or too big", what);
		BIO_free(b);
		return NULL;
	}
	k = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
	BIO_free(b);
	if (k == NULL) {
		buf_printf(err, "%s: ", what);
		ssl_why(err, "not a PEM private key without a passphrase");
		return NULL;
	}
	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA || EVP_PKEY_get_bits(k) < RSA_BITS_MIN) {
		buf_printf(err, "%s: not an RSA key of at least %d bits (RS256 needs one)", what,
		    RSA_BITS_MIN);
		EVP_PKEY_free(k);
		return NULL;
	}
	return k;
}

int
jwt_cert_thumbprints(const char *path, EVP_PKEY *key, char *x5t, char *x5t256,
    struct buf *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	BIO *b = BIO_new_file(path, "r");
	X509 *x = NULL;
	int rc = -1;

	if (b == NULL) {
		buf_printf(err, "certificate_file %s: %s", path, strerror(errno ? errno : ENOENT));
		ERR_clear_error();
		return -1;
	}
	if ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) == NULL) {
		buf_printf(err, "certificate_file %s: ", path);
		ssl_why(err, "not a PEM certificate");
		goto out;
	}
	if (EVP_PKEY_eq(X509_get0_pubkey(x), key) != 1) {
		buf_printf(err, "certificate_file %s is not the certificate of private_key_file's "
		    "key", path);
		ERR_clear_error();
		goto out;
	}
	if (X509_digest(x, EVP_sha1(), md, &len) != 1 || len != 20) {
		ssl_why(err, "SHA-1 of the certificate failed");
		goto out;
	}
	b64url_encode(md, len, x5t);
	if (X509_digest(x, EVP_sha256(), md, &len) != 1 || len != 32) {
		ssl_why(err, "SHA-256 of the certificate failed");
		goto out;
	}
	b64url_encode(md, len, x5t256);
	rc = 0;
out:
	X509_free(x);
	BIO_free(b);
	return rc;
}

/* s base64url-encoded, appended to out. */
static void
add_b64(struct buf *out, const unsigned char *s, size_t n)
{
	char *e = xmalloc(4 * ((n + 2) / 3) + 1);

	b64url_encode(s, n, e);
	buf_adds(out, e);
	explicit_bzero(e, strlen(e));
	free(e);
}

int
jwt_sign(EVP_PKEY *key, const char *header, const char *claims, struct buf *out,
    struct buf *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char *sig = NULL;
	size_t start = out->len, siglen = 0;
	int rc = -1;

	add_b64(out, (const unsigned char *)header, strlen(header));
	buf_addc(out, '.');
	add_b64(out, (const unsigned char *)claims, strlen(claims));
	if (ctx == NULL || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(ctx, NULL, &siglen, (const unsigned char *)out->s + start,
	    out->len - start) != 1) {
		ssl_why(err, "RS256: cannot sign");
		goto out;
	}
	sig = xmalloc(siglen);
	if (EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)out->s + start,
	    out->len - start) != 1) {
		ssl_why(err, "RS256: signing failed");
		goto out;
	}
	buf_addc(out, '.');
	add_b64(out, sig, siglen);
	rc = 0;
out:
	free(sig);
	EVP_MD_CTX_free(ctx);
	return rc;
}
