/* libcurl and libcrypto loaded at first use: the tables s3_lib.h renames every call to. */
#include "libckpt/storage/s3/s3_lib.h"
#include "internal.h"

/* set by CMake from the libraries found at configure time (their SONAMEs, then their files) */
#ifndef CKPT_CURL_SONAME
#define CKPT_CURL_SONAME "libcurl.so.4"
#endif
#ifndef CKPT_CURL_FILE
#define CKPT_CURL_FILE CKPT_CURL_SONAME
#endif
#ifndef CKPT_CRYPTO_SONAME
#define CKPT_CRYPTO_SONAME "libcrypto.so.3"
#endif
#ifndef CKPT_CRYPTO_FILE
#define CKPT_CRYPTO_FILE CKPT_CRYPTO_SONAME
#endif

ckpt__curl_fns ckpt__curl_fn;
ckpt__crypto_fns ckpt__crypto_fn;

static const char *const curl_names[] = { CKPT_CURL_SONAME, CKPT_CURL_FILE, NULL };
static const char *const crypto_names[] = { CKPT_CRYPTO_SONAME, CKPT_CRYPTO_FILE, NULL };

/* #f and p_##f: neither expands the renames */
#define CKPT__CURL_BIND(f) if (ckpt__dynlib_sym(d, h, #f, &ckpt__curl_fn.p_##f) < 0) return -1;
static int curl_bind(ckpt__dynlib *d, void *h)
{
	CKPT_CURL_FUNCS(CKPT__CURL_BIND)
	return 0;
}
#define CKPT__CRYPTO_BIND(f) if (ckpt__dynlib_sym(d, h, #f, &ckpt__crypto_fn.p_##f) < 0) return -1;
static int crypto_bind(ckpt__dynlib *d, void *h)
{
	CKPT_CRYPTO_FUNCS(CKPT__CRYPTO_BIND)
	return 0;
}

/* once, right after the symbols are bound: libcurl's global state (TLS) before any handle */
static void curl_after(void) { ckpt__curl_fn.p_curl_global_init(CURL_GLOBAL_DEFAULT); }

ckpt__dynlib ckpt__curl_dynlib = {
	"libcurl (" CKPT_CURL_SONAME ", for s3:// paths)", "CKPT_LIBCURL_LIBRARY", curl_names,
	curl_bind, curl_after, PTHREAD_ONCE_INIT, 0, ""
};
ckpt__dynlib ckpt__crypto_dynlib = {
	"libcrypto (" CKPT_CRYPTO_SONAME ", for s3:// paths)", "CKPT_LIBCRYPTO_LIBRARY", crypto_names,
	crypto_bind, NULL, PTHREAD_ONCE_INIT, 0, ""
};

int ckpt__s3_lib(void)
{
	CKPT_TRY(ckpt__dynlib_load(&ckpt__crypto_dynlib, NULL));
	return ckpt__dynlib_load(&ckpt__curl_dynlib, NULL);
}
