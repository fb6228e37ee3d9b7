/*
 * https.c: one HTTPS POST through libcurl; see https.h.  The only file
 * that includes <curl/curl.h>.
 *
 * Trusts: nothing the server sends.  Config keys: none.
 */
#include <string.h>

#include <curl/curl.h>

#include "lib/log.h"
#include "mail/https.h"

static int initialised;

struct sink {
	struct buf *body;
	int over;
};

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
	struct sink *k = arg;

	n *= size;
	if (k->body->len + n > HTTPS_BODY_MAX) {
		k->over = 1;
		return 0;	/* libcurl stops with CURLE_WRITE_ERROR */
	}
	buf_add(k->body, p, n);
	return n;
}

void
https_form_add(struct buf *b, const char *name, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	if (b->len > 0)
		buf_addc(b, '&');
	buf_adds(b, name);
	buf_addc(b, '=');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			buf_addc(b, (char)c);
		} else {
			buf_addc(b, '%');
			buf_addc(b, hex[c >> 4]);
			buf_addc(b, hex[c & 15]);
		}
	}
}

int
https_post(const struct https_post *p, long *status, struct buf *body, struct buf *err)
{
	char ebuf[CURL_ERROR_SIZE];
	struct curl_slist *hdr = NULL;
	struct sink k = { body, 0 };
	CURL *h = NULL;
	CURLcode rc;
	int ret = -1;

	if (!initialised) {
		if ((rc = curl_global_init(CURL_GLOBAL_DEFAULT)) != CURLE_OK) {
			buf_printf(err, "libcurl: %s", curl_easy_strerror(rc));
			return -1;
		}
		initialised = 1;
	}
	buf_reset(body);
	if ((h = curl_easy_init()) == NULL) {
		buf_printf(err, "%s: libcurl cannot start", p->url);
		return -1;
	}
	ebuf[0] = '\0';
	hdr = curl_slist_append(NULL, "Accept: application/json");
	if (hdr == NULL) {
		buf_printf(err, "%s: out of memory", p->url);
		goto out;
	}
	rc = curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_URL, p->url);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	/* The proxy given or none, whatever the environment says. */
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_PROXY, p->proxy ? p->proxy : "");
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_NOPROXY, "");
	if (rc == CURLE_OK && p->proxy)
		rc = curl_easy_setopt(h, CURLOPT_PROXYTYPE, (long)CURLPROXY_HTTP);
	if (rc == CURLE_OK && p->proxy)
		rc = curl_easy_setopt(h, CURLOPT_HTTPPROXYTUNNEL, 1L);
	if (rc == CURLE_OK && p->proxy_auth)
		rc = curl_easy_setopt(h, CURLOPT_PROXYUSERPWD, p->proxy_auth);
	if (rc == CURLE_OK && p->proxy_auth)
		rc = curl_easy_setopt(h, CURLOPT_PROXYAUTH, (long)CURLAUTH_BASIC);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (rc == CURLE_OK && p->ca_file)
		rc = curl_easy_setopt(h, CURLOPT_CAINFO, p->ca_file);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(p->timeout * 1000));
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(p->timeout * 1000));
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_MAXFILESIZE, (long)HTTPS_BODY_MAX);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_USERAGENT, "weir");
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_POSTFIELDS, p->form);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)p->formlen);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	if (rc == CURLE_OK)
		rc = curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
	if (rc != CURLE_OK) {
		buf_printf(err, "%s: libcurl: %s", p->url, curl_easy_strerror(rc));
		goto out;
	}
	rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		if (k.over || rc == CURLE_FILESIZE_EXCEEDED)
			buf_printf(err, "%s: an answer over %d bytes", p->url, HTTPS_BODY_MAX);
		else
			buf_printf(err, "%s: %s", p->url, ebuf[0] ? ebuf : curl_easy_strerror(rc));
		goto out;
	}
	if ((rc = curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status)) != CURLE_OK) {
		buf_printf(err, "%s: %s", p->url, curl_easy_strerror(rc));
		goto out;
	}
	ret = 0;
out:
	curl_easy_cleanup(h);
	curl_slist_free_all(hdr);
	return ret;
}
