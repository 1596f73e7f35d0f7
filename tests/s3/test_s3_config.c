/*
 * S3 configuration read as the AWS CLI reads it (libckpt/storage/s3/s3_config.c):
 * environment first, then the profile in the credentials and config files,
 * path-style for IP endpoints or `addressing_style = path`. No server needed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "test_support.h"

static const char *const vars[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
	"AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_CA_BUNDLE",
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "CKPT_S3_PART_SIZE", "CKPT_S3_PARALLEL",
	"CKPT_S3_MAX_ATTEMPTS", "CKPT_S3_STALL_SECONDS", "CKPT_S3_LOCK_LEASE_SECONDS", NULL };

static char *home;

/* each test runs in its own process (Criterion forks): a clean environment and a fresh HOME */
static void clean_env(void)
{
	for (int i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	home = ts_tmpdir();
	setenv("HOME", home, 1);
	char *aws = ts_join(home, ".aws");
	cr_assert_eq(mkdir(aws, 0755), 0);
	free(aws);
}

static void done(void)
{
	ts_rmtree(home);
	free(home);
}

static void put(const char *rel, const char *text)
{
	char *p = ts_join(home, rel);
	cr_assert_eq(ts_write_file(p, text, strlen(text)), 0);
	free(p);
}

static ckpt_s3_config *load_ok(void)
{
	ckpt_s3_config *c = NULL;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_OK, "%s", ckpt_error_last()->message);
	return c;
}

TestSuite(s3_config, .init = clean_env, .fini = done);

Test(s3_config, environment_wins_and_ip_endpoints_are_path_style)
{
	put(".aws/credentials", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n");
	put(".aws/config", "[default]\nregion = eu-west-3\n");
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	setenv("AWS_SESSION_TOKEN", "TOKEN", 1);
	setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
	ckpt_s3_config *c = load_ok();
	cr_expect_str_eq(c->access_key, "ENVKEY");
	cr_expect_str_eq(c->secret_key, "ENVSECRET");
	cr_expect_str_eq(c->session_token, "TOKEN");
	cr_expect_str_eq(c->region, "ap-south-1", "AWS_DEFAULT_REGION over the config file");
	cr_expect_str_eq(c->endpoint, "http://127.0.0.1:9000", "trailing slash dropped");
	cr_expect_eq(c->path_style, 1, "an IP endpoint cannot take bucket.host names");
	setenv("AWS_REGION", "us-west-2", 1);
	setenv("AWS_ENDPOINT_URL_S3", "https://s3.example.test", 1);
	ckpt_s3_config_free(c);
	c = load_ok();
	cr_expect_str_eq(c->region, "us-west-2", "AWS_REGION over AWS_DEFAULT_REGION");
	cr_expect_str_eq(c->endpoint, "https://s3.example.test", "AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL");
	cr_expect_eq(c->path_style, 0, "a DNS endpoint is virtual-hosted by default");
	ckpt_s3_config_free(c);
}

Test(s3_config, profile_from_credentials_and_config_files)
{
	put(".aws/credentials",
		"[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = DEFSECRET\n\n"
		"# a comment\n[train]\naws_access_key_id = TRAINKEY\naws_secret_access_key = TRAINSECRET\n"
		"aws_session_token = TRAINTOKEN\n");
	put(".aws/config",
		"[default]\nregion = eu-west-1\n\n[profile train]\nregion = eu-central-1\n"
		"endpoint_url = https://objects.example.test\ns3 =\n  addressing_style = path\n");
	setenv("AWS_PROFILE", "train", 1);
	ckpt_s3_config *c = load_ok();
	cr_expect_str_eq(c->profile, "train");
	cr_expect_str_eq(c->access_key, "TRAINKEY");
	cr_expect_str_eq(c->secret_key, "TRAINSECRET");
	cr_expect_str_eq(c->session_token, "TRAINTOKEN");
	cr_expect_str_eq(c->region, "eu-central-1");
	cr_expect_str_eq(c->endpoint, "https://objects.example.test");
	cr_expect_eq(c->path_style, 1, "addressing_style = path in the profile's s3 section");
	ckpt_s3_config_free(c);

	unsetenv("AWS_PROFILE");
	c = load_ok();
	cr_expect_str_eq(c->access_key, "DEFKEY");
	cr_expect_str_eq(c->region, "eu-west-1");
	cr_expect_str_eq(c->endpoint, "https://s3.eu-west-1.amazonaws.com", "AWS's endpoint for the region");
	cr_expect_eq(c->path_style, 0);
	cr_expect_null(c->session_token);
	ckpt_s3_config_free(c);
}

Test(s3_config, keys_in_config_file_and_s3_endpoint_override)
{
	put(".aws/config",
		"[profile ci]\naws_access_key_id = CFGKEY\naws_secret_access_key = CFGSECRET\n"
		"endpoint_url = https://general.example.test\ns3 =\n    endpoint_url = http://localhost:8333\n");
	setenv("AWS_PROFILE", "ci", 1);
	ckpt_s3_config *c = load_ok();
	cr_expect_str_eq(c->access_key, "CFGKEY", "keys may live in the config file's profile");
	cr_expect_str_eq(c->endpoint, "http://localhost:8333", "the s3 section's endpoint_url wins");
	cr_expect_eq(c->path_style, 1, "localhost is path-style");
	cr_expect_str_eq(c->region, "us-east-1", "no region anywhere: us-east-1");
	ckpt_s3_config_free(c);
}

Test(s3_config, files_named_by_variables_and_defaults_of_knobs)
{
	char *cred = ts_join(home, "elsewhere-credentials");
	const char *text = "[default]\naws_access_key_id = K2\naws_secret_access_key = S2\n";
	cr_assert_eq(ts_write_file(cred, text, strlen(text)), 0);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	ckpt_s3_config *c = load_ok();
	cr_expect_str_eq(c->access_key, "K2");
	cr_expect_eq(c->part_size, 8u << 20);
	cr_expect_eq(c->parallel, 8u);
	cr_expect_eq(c->max_attempts, 5u);
	cr_expect_eq(c->lock_lease_seconds, 60u);
	cr_expect_null(c->ca_bundle, "TLS verified against the system's certificates by default");
	ckpt_s3_config_free(c);
	free(cred);
}

Test(s3_config, no_credentials_is_anonymous)
{
	ckpt_s3_config *c = load_ok();
	cr_expect_null(c->access_key);
	ckpt_s3_config_free(c);
}

Test(s3_config, errors_name_the_variable_or_profile)
{
	setenv("AWS_ACCESS_KEY_ID", "K", 1);
	ckpt_s3_config *c = NULL;
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_EINVAL);
	cr_expect(strstr(ckpt_error_last()->message, "AWS_SECRET_ACCESS_KEY") != NULL, "%s", ckpt_error_last()->message);
	setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
	setenv("CKPT_S3_PART_SIZE", "1024", 1);
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_EINVAL);
	cr_expect(strstr(ckpt_error_last()->message, "CKPT_S3_PART_SIZE=1024") != NULL, "%s",
		ckpt_error_last()->message);
	unsetenv("CKPT_S3_PART_SIZE");
	setenv("AWS_ENDPOINT_URL", "127.0.0.1:9000", 1);
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_EINVAL);
	cr_expect(strstr(ckpt_error_last()->message, "no scheme") != NULL, "%s", ckpt_error_last()->message);
	unsetenv("AWS_ENDPOINT_URL");
	put(".aws/config", "[default]\ns3 =\n  addressing_style = sideways\n");
	cr_assert_eq(ckpt_s3_config_load(&c), CKPT_EINVAL);
	cr_expect(strstr(ckpt_error_last()->message, "sideways") != NULL, "%s", ckpt_error_last()->message);
}

Test(s3_config, paths_split_into_bucket_and_key)
{
	char *b, *k;
	cr_assert_eq(ckpt_s3_path_split(&b, &k, "s3://bucket/run/7/ckpt-3"), CKPT_OK);
	cr_expect_str_eq(b, "bucket");
	cr_expect_str_eq(k, "run/7/ckpt-3");
	free(b);
	free(k);
	cr_assert_eq(ckpt_s3_path_split(&b, &k, "s3://bucket/dir/"), CKPT_OK);
	cr_expect_str_eq(k, "dir", "a trailing slash names the same prefix");
	free(b);
	free(k);
	cr_assert_eq(ckpt_s3_path_split(&b, &k, "s3://bucket"), CKPT_OK);
	cr_expect_str_eq(k, "");
	free(b);
	free(k);
	cr_expect_eq(ckpt_s3_path_split(&b, &k, "s3:///key"), CKPT_EINVAL);
	cr_expect_eq(ckpt_s3_path_split(&b, &k, "/local/path"), CKPT_EINVAL);
	cr_expect(ckpt_path_is_s3("s3://b/k"));
	cr_expect(!ckpt_path_is_s3("S3:/b"));
	cr_expect(!ckpt_path_is_s3(NULL));
}
