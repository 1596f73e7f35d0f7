/* kill -9 during incremental saves: the child's loop and the check after each kill (incr_kill.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "incr_kill.h"
#include "manager_common.h"

#define W 1024 /* floats per row: 4 KiB */

static ckpt_variable *add(ckpt_checkpoint *ck, const char *name, int rows)
{
	int64_t d[2] = { rows, W };
	ckpt_shape sh;
	if (ckpt_shape_make(&sh, 2, d) < 0)
		return NULL;
	return ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name, CKPT_DT_FLOAT, &sh, NULL);
}

static float base_at(size_t i)
{
	return (float)(i % 100003) * 0.5f;
}

/* mc_build's state and the two big values; NULL on failure */
static int build(mc_state *s, ckpt_vfs *vfs, int base_rows, int emb_rows, ckpt_variable **base, ckpt_variable **emb)
{
	if (mc_build(s, vfs) < 0)
		return -1;
	if (!(*base = add(s->ck, "base", base_rows)) || !(*emb = add(s->ck, "emb", emb_rows)))
		return -1;
	float *b = ckpt_variable_local(*base);
	if (!b)
		return -1;
	for (size_t i = 0; i < (size_t)base_rows * W; i++)
		b[i] = base_at(i);
	return 0;
}

void ik_save_forever(const char *dir, ckpt_vfs *vfs, int base_rows, int emb_rows, const char *log)
{
	mc_state s;
	ckpt_variable *base, *emb;
	if (build(&s, vfs, base_rows, emb_rows, &base, &emb) < 0)
		_exit(11);
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	mo.no_fsync = 1;
	mo.incremental = 1;
	ckpt_manager *m;
	if (ckpt_manager_new_ext(&m, s.ck, dir, 2, &mo) < 0) {
		fprintf(stderr, "child: %s\n", ckpt_error_last()->message);
		_exit(12);
	}
	ckpt_restore_status *st = NULL;
	if (ckpt_status_of(ckpt_manager_restore_latest(&st, m)) < 0)
		_exit(13);
	ckpt_restore_status_free(st);
	/* started: the parent's random delay counts from here, not from a start-up that load can stretch */
	char ready[4096];
	snprintf(ready, sizeof(ready), "%s.ready", log);
	FILE *rf = fopen(ready, "w");
	if (!rf)
		_exit(16);
	fclose(rf);
	for (;;) {
		/* the save's number is the next one: its row is set to it before the save */
		int64_t next = mc_get(&s) + 1;
		float *e = ckpt_variable_local(emb);
		if (!e)
			_exit(15);
		for (int j = 0; j < W; j++)
			e[(size_t)(next % emb_rows) * W + j] = (float)next;
		if (mc_save(&s, m, NULL) < 0) {
			fprintf(stderr, "child: %s\n", ckpt_error_last()->message);
			_exit(14);
		}
		uint64_t wr, ru;
		FILE *f = ckpt_checkpoint_last_save_bytes(&wr, &ru, s.ck) == CKPT_OK ? fopen(log, "a") : NULL;
		if (f) {
			fprintf(f, "%llu\n", (unsigned long long)ru);
			fclose(f);
		}
	}
}

int64_t ik_check_latest(const char *dir, ckpt_vfs *vfs, int base_rows, int emb_rows, int k)
{
	ckpt_manager_options mo = CKPT_MANAGER_OPTIONS_INIT;
	mo.vfs = vfs;
	ckpt_manager *m;
	cr_assert_eq(ckpt_manager_new_ext(&m, NULL, dir, 2, &mo), CKPT_OK, "kill %d: %s", k,
		ckpt_error_last()->message);
	const char *p = NULL;
	int rc = ckpt_status_of(p = ckpt_manager_latest_valid(m));
	if (rc == CKPT_ENOTFOUND) /* killed before its first save completed */
		p = NULL;
	else
		cr_assert_eq(rc, CKPT_OK, "kill %d: %s", k, ckpt_error_last()->message);
	if (!p) {
		ckpt_manager_free(m);
		return -1;
	}
	char *path = strdup(p);
	ckpt_manager_free(m);
	/* every byte of it, copied or linked from older saves or not, against its index */
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = vfs;
	ckpt_reader *r;
	cr_assert_eq(ckpt_reader_open(&r, path, &oo), CKPT_OK, "kill %d: %s: %s", k, path, ckpt_error_last()->message);
	cr_assert_eq(ckpt_reader_verify_all(r), CKPT_OK, "kill %d: %s: %s", k, path, ckpt_error_last()->message);
	ckpt_reader_free(r);
	mc_state s;
	ckpt_variable *base, *emb;
	cr_assert_eq(build(&s, vfs, base_rows, emb_rows, &base, &emb), 0);
	float *b = ckpt_variable_local(base);
	memset(b, 0, (size_t)base_rows * W * sizeof(float));
	ckpt_restore_status *rs = NULL;
	cr_assert_eq(ckpt_checkpoint_restore(&rs, s.ck, path), CKPT_OK, "kill %d: %s: %s", k, path,
		ckpt_error_last()->message);
	ckpt_restore_status_free(rs);
	int64_t num = mc_number(strrchr(path, '/') + 1);
	cr_assert_eq(mc_get(&s), num, "kill %d: %s holds save %lld's value", k, path, (long long)mc_get(&s));
	b = ckpt_variable_local(base);
	for (size_t i = 0; i < (size_t)base_rows * W; i++)
		cr_assert_eq(b[i], base_at(i), "kill %d: %s: base[%zu] = %g", k, path, i, (double)b[i]);
	const float *e = ckpt_variable_local(emb);
	for (int j = 0; j < W; j++)
		cr_assert_eq(e[(size_t)(num % emb_rows) * W + j], (float)num, "kill %d: %s: the embedding's row of save %lld",
			k, path, (long long)num);
	ckpt_checkpoint_free(s.ck);
	free(path);
	return num;
}

void ik_wait_started(const char *log, pid_t child, int k)
{
	char ready[4096];
	snprintf(ready, sizeof(ready), "%s.ready", log);
	for (int i = 0; i < 120000 && access(ready, F_OK) != 0; i++) {
		int st;
		cr_assert_eq(waitpid(child, &st, WNOHANG), 0, "kill %d: the trainer ended before it started saving (status "
			"%d)", k, st);
		struct timespec ts = { 0, 1000000L };
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(access(ready, F_OK), 0, "kill %d: the trainer did not start saving in 120 s", k);
	unlink(ready);
}

uint64_t ik_reused(const char *log)
{
	FILE *f = fopen(log, "r");
	unsigned long long v, sum = 0;
	while (f && fscanf(f, "%llu", &v) == 1)
		sum += v;
	if (f)
		fclose(f);
	return sum;
}
