/*
 * libcurl and libcrypto, loaded at first use (libckpt/base/dynlib.h says why):
 * only s3:// paths need them, and with their dependencies (TLS, Kerberos,
 * LDAP, SSH, ...) they would be mapped by every process that links libckpt.
 * Include this instead of <curl/curl.h> / <openssl/evp.h>; it works as
 * h5_lib.h does: a symbol used but not listed fails the link, one listed but
 * not declared fails to compile. Call ckpt__s3_lib() before the first use
 * so that a missing library is an error, not an abort.
 */
#ifndef CKPT_S3_LIB_H
#define CKPT_S3_LIB_H

/* the type-checking macros would hide the functions the table points to */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "libckpt/base/dynlib.h"

#define CKPT_CURL_FUNCS(X) \
	X(curl_easy_cleanup) \
	X(curl_easy_getinfo) \
	X(curl_easy_init) \
	X(curl_easy_perform) \
	X(curl_easy_reset) \
	X(curl_easy_setopt) \
	X(curl_easy_strerror) \
	X(curl_getdate) \
	X(curl_global_init) \
	X(curl_share_cleanup) \
	X(curl_share_init) \
	X(curl_share_setopt) \
	X(curl_slist_append) \
	X(curl_slist_free_all)

#define CKPT_CRYPTO_FUNCS(X) \
	X(EVP_Digest) \
	X(EVP_DigestFinal_ex) \
	X(EVP_DigestInit_ex) \
	X(EVP_DigestUpdate) \
	X(EVP_EncodeBlock) \
	X(EVP_MD_CTX_free) \
	X(EVP_MD_CTX_new) \
	X(EVP_md5) \
	X(EVP_sha256) \
	X(HMAC)

#define CKPT__S3_SLOT(f) __typeof__(&f) p_##f; /* p_: a member name the renames below do not touch */
typedef struct ckpt__curl_fns { CKPT_CURL_FUNCS(CKPT__S3_SLOT) } ckpt__curl_fns;
typedef struct ckpt__crypto_fns { CKPT_CRYPTO_FUNCS(CKPT__S3_SLOT) } ckpt__crypto_fns;
#undef CKPT__S3_SLOT

extern ckpt__curl_fns ckpt__curl_fn;
extern ckpt__crypto_fns ckpt__crypto_fn;
extern ckpt__dynlib ckpt__curl_dynlib;
extern ckpt__dynlib ckpt__crypto_dynlib;

/** Load libcurl and libcrypto (once); CKPT_OK, or CKPT_EUNSUPPORTED naming the library and why. */
int ckpt__s3_lib(void);

static inline const ckpt__curl_fns *ckpt__curl_f(void)
{
	if (!ckpt__dynlib_loaded(&ckpt__curl_dynlib))
		ckpt__dynlib_need(&ckpt__curl_dynlib);
	return &ckpt__curl_fn;
}

static inline const ckpt__crypto_fns *ckpt__crypto_f(void)
{
	if (!ckpt__dynlib_loaded(&ckpt__crypto_dynlib))
		ckpt__dynlib_need(&ckpt__crypto_dynlib);
	return &ckpt__crypto_fn;
}

/* curl.h wraps these three in argument-count macros of the same name */
#undef curl_easy_getinfo
#undef curl_easy_setopt
#undef curl_share_setopt
#define curl_easy_cleanup (ckpt__curl_f()->p_curl_easy_cleanup)
#define curl_easy_getinfo (ckpt__curl_f()->p_curl_easy_getinfo)
#define curl_easy_init (ckpt__curl_f()->p_curl_easy_init)
#define curl_easy_perform (ckpt__curl_f()->p_curl_easy_perform)
#define curl_easy_reset (ckpt__curl_f()->p_curl_easy_reset)
#define curl_easy_setopt (ckpt__curl_f()->p_curl_easy_setopt)
#define curl_easy_strerror (ckpt__curl_f()->p_curl_easy_strerror)
#define curl_getdate (ckpt__curl_f()->p_curl_getdate)
#define curl_global_init (ckpt__curl_f()->p_curl_global_init)
#define curl_share_cleanup (ckpt__curl_f()->p_curl_share_cleanup)
#define curl_share_init (ckpt__curl_f()->p_curl_share_init)
#define curl_share_setopt (ckpt__curl_f()->p_curl_share_setopt)
#define curl_slist_append (ckpt__curl_f()->p_curl_slist_append)
#define curl_slist_free_all (ckpt__curl_f()->p_curl_slist_free_all)
#define EVP_Digest (ckpt__crypto_f()->p_EVP_Digest)
#define EVP_DigestFinal_ex (ckpt__crypto_f()->p_EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (ckpt__crypto_f()->p_EVP_DigestInit_ex)
#define EVP_DigestUpdate (ckpt__crypto_f()->p_EVP_DigestUpdate)
#define EVP_EncodeBlock (ckpt__crypto_f()->p_EVP_EncodeBlock)
#define EVP_MD_CTX_free (ckpt__crypto_f()->p_EVP_MD_CTX_free)
#define EVP_MD_CTX_new (ckpt__crypto_f()->p_EVP_MD_CTX_new)
#define EVP_md5 (ckpt__crypto_f()->p_EVP_md5)
#define EVP_sha256 (ckpt__crypto_f()->p_EVP_sha256)
#define HMAC (ckpt__crypto_f()->p_HMAC)

#endif
