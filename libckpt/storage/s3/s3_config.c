/*
 * S3 configuration as the AWS CLI reads it: environment variables first, then
 * the profile in ~/.aws/credentials and ~/.aws/config (botocore's INI dialect:
 * `[profile NAME]` in config, `[NAME]` in credentials, and an indented block
 * under `s3 =` for S3-only settings such as `addressing_style = path`).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include "internal.h"
#include "ckpt/s3.h"
#include "s3_internal.h"

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/*
 * The value of `key` in `section` of the INI file at `path` (NULL when the
 * file, section or key is absent). With `sub`, the key is looked up inside
 * the indented block that follows `sub =` in that section.
 */
static char *ini_get(const char *path, const char *section, const char *sub, const char *key)
{
	FILE *f = path ? fopen(path, "r") : NULL;
	if (!f)
		return NULL;
	char line[4096];
	int in_section = 0, in_sub = 0;
	char *found = NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		int indented = line[0] == ' ' || line[0] == '\t';
		char *s = trim(line);
		if (*s == '\0' || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *end = strchr(s, ']');
			if (end)
				*end = '\0';
			in_section = strcmp(trim(s + 1), section) == 0;
			in_sub = 0;
			continue;
		}
		if (!in_section)
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			continue;
		*eq = '\0';
		char *k = trim(s), *v = trim(eq + 1);
		if (!indented)
			in_sub = sub && strcmp(k, sub) == 0 && *v == '\0';
		if (indented != (sub != NULL) || (sub && !in_sub))
			continue;
		if (strcmp(k, key) == 0)
			found = ckpt__strdup(v);
	}
	fclose(f);
	return found;
}

static char *home_file(const char *env, const char *name)
{
	const char *p = getenv(env);
	if (p && *p)
		return ckpt__strdup(p);
	const char *home = getenv("HOME");
	return home ? ckpt__asprintf("%s/.aws/%s", home, name) : NULL;
}

static char *env_dup(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? ckpt__strdup(v) : NULL;
}

/* A profile setting: `key` in config's `[profile P]` (`[default]` for the default profile). */
static char *config_get(const char *config, const char *profile, const char *sub, const char *key)
{
	char *section = strcmp(profile, "default") == 0 ? ckpt__strdup("default")
							 : ckpt__asprintf("profile %s", profile);
	char *v = section ? ini_get(config, section, sub, key) : NULL;
	ckpt__free(section);
	return v;
}

int s3_env_unsigned(const char *name, unsigned long min, unsigned long max, unsigned long dflt,
	unsigned long *out)
{
	const char *v = getenv(name);
	*out = dflt;
	if (!v || !*v)
		return CKPT_OK;
	char *end;
	unsigned long x = strtoul(v, &end, 10);
	if (*end || x < min || x > max)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s=%s: expected an integer in [%lu, %lu]", name, v,
			min, max);
	*out = x;
	return CKPT_OK;
}

/* 1 when the endpoint's host is an IP address or localhost: virtual-hosted names cannot resolve there. */
static int host_needs_path_style(const char *endpoint)
{
	const char *h = strstr(endpoint, "://");
	h = h ? h + 3 : endpoint;
	char host[256];
	size_t n = 0;
	if (*h == '[')
		return 1; /* IPv6 literal */
	while (h[n] && h[n] != ':' && h[n] != '/' && n + 1 < sizeof(host)) {
		host[n] = h[n];
		n++;
	}
	host[n] = '\0';
	struct in_addr a;
	return inet_pton(AF_INET, host, &a) == 1 || strcmp(host, "localhost") == 0;
}

void ckpt_s3_config_free(ckpt_s3_config *c)
{
	if (!c)
		return;
	ckpt__free(c->access_key);
	ckpt__free(c->secret_key);
	ckpt__free(c->session_token);
	ckpt__free(c->region);
	ckpt__free(c->endpoint);
	ckpt__free(c->ca_bundle);
	ckpt__free(c->profile);
	ckpt__free(c);
}

int ckpt_s3_config_load(ckpt_s3_config **out)
{
	ckpt_s3_config *c = ckpt__calloc(1, sizeof(*c));
	char *creds = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char *config = home_file("AWS_CONFIG_FILE", "config");
	int rc = CKPT_OK;
	if (!c) {
		rc = CKPT_ENOMEM;
		goto done;
	}
	c->profile = env_dup("AWS_PROFILE");
	if (!c->profile)
		c->profile = ckpt__strdup("default");

	c->access_key = env_dup("AWS_ACCESS_KEY_ID");
	if (c->access_key) {
		c->secret_key = env_dup("AWS_SECRET_ACCESS_KEY");
		c->session_token = env_dup("AWS_SESSION_TOKEN");
		if (!c->secret_key) {
			rc = ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
				"AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
			goto done;
		}
	} else {
		/* the credentials file first, then the config file, as botocore does */
		const char *files[2] = { creds, config };
		for (int i = 0; i < 2 && !c->access_key; i++) {
			char *section = i == 0 || strcmp(c->profile, "default") == 0 ? ckpt__strdup(c->profile)
										      : ckpt__asprintf("profile %s", c->profile);
			c->access_key = ini_get(files[i], section, NULL, "aws_access_key_id");
			if (c->access_key) {
				c->secret_key = ini_get(files[i], section, NULL, "aws_secret_access_key");
				c->session_token = ini_get(files[i], section, NULL, "aws_session_token");
				if (!c->secret_key)
					rc = ckpt__fail(CKPT_EINVAL, files[i], NULL, -1,
						"profile '%s' has aws_access_key_id but no aws_secret_access_key",
						c->profile);
			}
			ckpt__free(section);
		}
		if (rc < 0)
			goto done;
	}

	c->region = env_dup("AWS_REGION");
	if (!c->region)
		c->region = env_dup("AWS_DEFAULT_REGION");
	if (!c->region)
		c->region = config_get(config, c->profile, NULL, "region");
	if (!c->region)
		c->region = ckpt__strdup("us-east-1");

	c->endpoint = env_dup("AWS_ENDPOINT_URL_S3");
	if (!c->endpoint)
		c->endpoint = env_dup("AWS_ENDPOINT_URL");
	if (!c->endpoint)
		c->endpoint = config_get(config, c->profile, "s3", "endpoint_url");
	if (!c->endpoint)
		c->endpoint = config_get(config, c->profile, NULL, "endpoint_url");
	if (!c->endpoint)
		c->endpoint = c->region ? ckpt__asprintf("https://s3.%s.amazonaws.com", c->region) : NULL;
	if (!c->endpoint || !c->region || !c->profile) {
		rc = CKPT_ENOMEM;
		goto done;
	}
	if (!strstr(c->endpoint, "://")) {
		rc = ckpt__fail(CKPT_EINVAL, NULL, NULL, -1,
			"S3 endpoint '%s' has no scheme (expected http:// or https://)", c->endpoint);
		goto done;
	}
	size_t n = strlen(c->endpoint);
	while (n && c->endpoint[n - 1] == '/')
		c->endpoint[--n] = '\0';

	char *style = config_get(config, c->profile, "s3", "addressing_style");
	c->path_style = host_needs_path_style(c->endpoint) || (style && strcmp(style, "path") == 0);
	if (style && strcmp(style, "path") && strcmp(style, "virtual") && strcmp(style, "auto"))
		rc = ckpt__fail(CKPT_EINVAL, config, NULL, -1,
			"profile '%s': addressing_style = %s (expected path, virtual or auto)", c->profile, style);
	ckpt__free(style);
	if (rc < 0)
		goto done;
	c->ca_bundle = env_dup("AWS_CA_BUNDLE");

	unsigned long v;
	if ((rc = s3_env_unsigned("CKPT_S3_PART_SIZE", 5ul << 20, 5ul << 30, 8ul << 20, &v)) < 0)
		goto done;
	c->part_size = v;
	if ((rc = s3_env_unsigned("CKPT_S3_PARALLEL", 1, 64, 8, &v)) < 0)
		goto done;
	c->parallel = (unsigned)v;
	if ((rc = s3_env_unsigned("CKPT_S3_MAX_ATTEMPTS", 1, 20, 5, &v)) < 0)
		goto done;
	c->max_attempts = (unsigned)v;
	if ((rc = s3_env_unsigned("CKPT_S3_STALL_SECONDS", 1, 3600, 30, &v)) < 0)
		goto done;
	c->stall_seconds = (unsigned)v;
	if ((rc = s3_env_unsigned("CKPT_S3_LOCK_LEASE_SECONDS", 2, 86400, 60, &v)) < 0)
		goto done;
	c->lock_lease_seconds = (unsigned)v;
done:
	ckpt__free(creds);
	ckpt__free(config);
	if (rc < 0) {
		ckpt_s3_config_free(c);
		return rc;
	}
	*out = c;
	return CKPT_OK;
}

int ckpt_path_is_s3(const char *path)
{
	return path && strncmp(path, "s3://", 5) == 0;
}

int ckpt_s3_path_split(char **bucket, char **key, const char *path)
{
	if (!ckpt_path_is_s3(path) || path[5] == '\0' || path[5] == '/')
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "not an S3 path (expected s3://bucket/key)");
	const char *b = path + 5, *slash = strchr(b, '/');
	size_t bn = slash ? (size_t)(slash - b) : strlen(b);
	const char *k = slash ? slash + 1 : "";
	while (*k == '/')
		k++;
	char *bb = ckpt__strndup(b, bn), *kk = ckpt__strdup(k);
	if (!bb || !kk) {
		ckpt__free(bb);
		ckpt__free(kk);
		return CKPT_ENOMEM;
	}
	/* "s3://b/dir/" names the same prefix as "s3://b/dir" */
	size_t kn = strlen(kk);
	while (kn && kk[kn - 1] == '/')
		kk[--kn] = '\0';
	*bucket = bb;
	*key = kk;
	return CKPT_OK;
}

size_t s3_dot_segment(const char *key, const char **seg)
{
	for (const char *s = key; *s;) {
		size_t n = strcspn(s, "/");
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) {
			*seg = s;
			return n;
		}
		s += n + (s[n] == '/');
	}
	return 0;
}

int ckpt__state_name_check(const char *dir, const char *state, const char *name)
{
	if (!ckpt_path_is_s3(dir))
		return CKPT_OK;
	const char *seg;
	if (name[0] == '/' || name[0] == '\0' || strstr(name, "://") != NULL || s3_dot_segment(name, &seg))
		return ckpt__fail(CKPT_EFORMAT, state, NULL, -1,
			"names checkpoint '%s', which is not inside %s: refused (a state file on S3 may only name "
			"checkpoints under its own prefix)", name, dir);
	return CKPT_OK;
}
