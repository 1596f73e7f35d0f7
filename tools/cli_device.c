/*
 * `--device cuda[:0,1,...]` for `ckpt restore`: the CUDA provider, loaded
 * at run time (dlopen) so the tool never links a GPU runtime and runs where
 * none is installed. The library is found as CKPT_CUDA_LIBRARY names it,
 * else in the build tree, else by its SONAME (beside an installed tool, via
 * its RUNPATH). Also the replica check through device-to-host copies.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* ckpt/cuda.h's entry points, by name: the tool does not include the header of a library it does not link */
typedef struct ckpt_cuda_provider ckpt_cuda_provider;


struct cli_device {
	void *lib;
	ckpt_cuda_provider *provider;
	const ckpt_memory_provider *table;
	void (*provider_free)(ckpt_cuda_provider *);
	const char *describe;
};

int cli_device_parse(const cli_cmd *cmd, const char *spec, int *is_cuda, int *devices, int *ndevices)
{
	const char *p;

	*is_cuda = 0;
	*ndevices = 0;
	if (!spec || strcmp(spec, "cpu") == 0)
		return CLI_EXIT_OK;
	if (strncmp(spec, "cuda", 4) != 0 || (spec[4] && spec[4] != ':'))
		return cli_usage_error(cmd, "--device wants cpu, cuda or cuda:ID[,ID...], got '%s'", spec);
	*is_cuda = 1;
	if (!spec[4])
		return CLI_EXIT_OK; /* every device the runtime sees */
	for (p = spec + 5;;) {
		char *end = NULL;
		long v;
		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno || v < 0 || v > 1023 || (*end && *end != ','))
			return cli_usage_error(cmd, "--device: '%s' is not a list of device numbers", spec);
		if (*ndevices == CLI_MAX_DEVICES)
			return cli_usage_error(cmd, "--device: more than %d devices", CLI_MAX_DEVICES);
		devices[(*ndevices)++] = (int)v;
		if (!*end)
			return CLI_EXIT_OK;
		p = end + 1;
	}
}

static void *sym(void *lib, const char *name, const char *file)
{
	void *f = dlsym(lib, name);
	if (!f)
		cli_report(file, NULL, -1, "the CUDA provider library has no %s", name);
	return f;
}

int cli_device_open(cli_device **out)
{
	const char *env = getenv("CKPT_CUDA_LIBRARY");
	const char *tried[3];
	char why[1024] = "";
	size_t nt = 0, i, len = 0;
	cli_device *d;
	void *lib = NULL;
	int (*provider_new)(ckpt_cuda_provider **, const void *);
	const ckpt_memory_provider *(*table)(const ckpt_cuda_provider *);
	const char *(*describe)(const ckpt_cuda_provider *);

	*out = NULL;
	if (env && *env)
		tried[nt++] = env;
	else {
#ifdef CKPT_CUDA_LIBRARY_BUILD
		tried[nt++] = CKPT_CUDA_LIBRARY_BUILD;
#endif
		tried[nt++] = "libckpt_cuda.so." CKPT_CUDA_SOVERSION;
	}
	for (i = 0; i < nt && !lib; i++) {
		lib = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
		if (!lib && len < sizeof(why))
			len += (size_t)snprintf(why + len, sizeof(why) - len, "%s%s", len ? "; " : "", dlerror());
	}
	if (!lib)
		return cli_report(NULL, NULL, -1, "--device cuda: cannot load the CUDA provider library ckpt_cuda: %s%s",
			why, env && *env ? "" : " (set CKPT_CUDA_LIBRARY to its file)");
	if (!(d = calloc(1, sizeof(*d)))) {
		dlclose(lib);
		return cli_report(NULL, NULL, -1, "out of memory");
	}
	d->lib = lib;
	*(void **)&provider_new = sym(lib, "ckpt_cuda_provider_new", tried[i - 1]);
	*(void **)&table = sym(lib, "ckpt_cuda_provider_table", tried[i - 1]);
	*(void **)&describe = sym(lib, "ckpt_cuda_provider_describe", tried[i - 1]);
	*(void **)&d->provider_free = sym(lib, "ckpt_cuda_provider_free", tried[i - 1]);
	if (!provider_new || !table || !describe || !d->provider_free) {
		cli_device_close(d);
		return CLI_EXIT_ERROR;
	}
	if (provider_new(&d->provider, NULL) != CKPT_OK) {
		cli_report_last(NULL, NULL);
		cli_device_close(d);
		return CLI_EXIT_ERROR;
	}
	d->table = table(d->provider);
	d->describe = describe(d->provider);
	*out = d;
	return CLI_EXIT_OK;
}

const ckpt_memory_provider *cli_device_table(const cli_device *d)
{
	return d->table;
}

const char *cli_device_describe(const cli_device *d)
{
	return d->describe;
}

void cli_device_close(cli_device *d)
{
	if (!d)
		return;
	if (d->provider)
		d->provider_free(d->provider);
	/* the library stays mapped: the runtime's own exit handlers live in what it loaded */
	free(d);
}
