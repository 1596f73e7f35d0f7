/* manager_common: the bodies of the helpers declared in manager_common.h. */
#include "manager_common.h"

void mc_on_warn(const char *msg, void *ctx)
{
	mc_warnings *w = ctx;
	if (!w)
		return;
	w->n++;
	snprintf(w->last, sizeof(w->last), "%s", msg);
	size_t l = strlen(w->all);
	snprintf(w->all + l, sizeof(w->all) - l, "%s\n", msg);
}

int mc_build(mc_state *s, ckpt_vfs *vfs)
{
	memset(s, 0, sizeof(*s));
	ckpt_checkpoint_options o = CKPT_CHECKPOINT_OPTIONS_INIT;
	o.vfs = vfs;
	o.no_fsync = 1; /* killed processes and failed calls, not power cuts: the order of renames is what counts */
	o.warn = mc_on_warn;
	o.warn_ctx = &s->warn;
	int rc = ckpt_checkpoint_new(&s->ck, &o);
	ckpt_shape sc = { 0 }, v64;
	int64_t d = 64;
	if (rc == CKPT_OK)
		rc = ckpt_shape_make(&v64, 1, &d);
	ckpt_object *model = NULL;
	if (rc == CKPT_OK)
		rc = ckpt_status_of(model = ckpt_object_new_child(ckpt_checkpoint_root(s->ck), "model"));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(s->value = ckpt_object_add_variable(ckpt_checkpoint_root(s->ck), "value", "value", CKPT_DT_INT64, &sc, NULL));
	if (rc == CKPT_OK)
		rc = ckpt_status_of(s->vec = ckpt_object_add_variable(model, "vec", "vec", CKPT_DT_INT64, &v64, NULL));
	return rc;
}

int mc_set(mc_state *s, int64_t v)
{
	int64_t buf[64];
	for (int i = 0; i < 64; i++)
		buf[i] = v;
	int rc = ckpt_variable_assign(s->value, &v, sizeof(v));
	return rc < 0 ? rc : ckpt_variable_assign(s->vec, buf, sizeof(buf));
}

int64_t mc_get(mc_state *s)
{
	int64_t v = -1;
	ckpt_variable_read(s->value, &v, sizeof(v));
	return v;
}

int mc_save(mc_state *s, ckpt_manager *m, const char **path)
{
	int rc = mc_set(s, ckpt_checkpoint_save_counter(s->ck) + 1);
	return rc < 0 ? rc : ckpt_status_of(path ? (*path = ckpt_manager_save(m)) : ckpt_manager_save(m));
}

int64_t mc_number(const char *base)
{
	if (strncmp(base, "ckpt-", 5) != 0 || !base[5])
		return -1;
	int64_t v = 0;
	for (const char *p = base + 5; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static int mc_read_i64(ckpt_reader *r, const char *key, int64_t *out)
{
	size_t i;
	if (ckpt_reader_find(&i, r, key) < 0 || ckpt_reader_var(r, i)->nbytes != 8)
		return -1;
	return ckpt_reader_read_into(r, i, out, 8);
}

/* Complete: index opens, every shard exists with the size the index implies, values read and agree. */
static int mc_complete(ckpt_vfs *vfs, const char *prefix, int64_t *value, int64_t *counter)
{
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = vfs;
	ckpt_reader *r;
	if (ckpt_reader_open(&r, prefix, &oo) < 0)
		return 0;
	int ok = 1;
	for (int s = 0; s < ckpt_reader_num_shards(r) && ok; s++) {
		uint64_t end = 0, have = 0;
		for (size_t i = 0; i < ckpt_reader_num_entries(r); i++) {
			const ckpt_var_info *v = ckpt_reader_var(r, i);
			if (v->shard == s && v->offset >= 0 && (uint64_t)v->offset + v->nbytes > end)
				end = (uint64_t)v->offset + v->nbytes;
		}
		int ex = 0;
		const char *sp = ckpt_reader_shard_path(r, s, &ex);
		ckpt_io *io = NULL;
		ok = ex && ckpt_vfs_open(&io, vfs, sp, CKPT_IO_READ) == CKPT_OK && ckpt_io_size(&have, io) == CKPT_OK &&
			have == end;
		if (io)
			ckpt_io_close(io);
	}
	int64_t vec[64];
	size_t vi;
	if (ok)
		ok = mc_read_i64(r, "value/.ATTRIBUTES/VARIABLE_VALUE", value) == CKPT_OK &&
			mc_read_i64(r, "save_counter/.ATTRIBUTES/VARIABLE_VALUE", counter) == CKPT_OK &&
			ckpt_reader_find(&vi, r, "model/vec/.ATTRIBUTES/VARIABLE_VALUE") == CKPT_OK &&
			ckpt_reader_read_into(r, vi, vec, sizeof(vec)) == CKPT_OK;
	for (int i = 0; ok && i < 64; i++)
		cr_assert_eq(vec[i], *value, "%s mixes two states: value %lld, vec[%d] %lld", prefix, (long long)*value, i,
			(long long)vec[i]);
	ckpt_reader_free(r);
	return ok;
}

/* The "ckpt-N" of model_checkpoint_path and of every all_model_checkpoint_paths line. */
static void mc_parse_state(mc_dir *d, const char *text)
{
	d->has_state = 1;
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		int latest = strncmp(line, "model_checkpoint_path:", 22) == 0;
		if (!latest && strncmp(line, "all_model_checkpoint_paths:", 27) != 0)
			continue;
		const char *q = strchr(line, '"');
		const char *e = q ? strchr(q + 1, '"') : NULL;
		if (!e)
			continue;
		char base[256];
		size_t l = (size_t)(e - q - 1) < sizeof(base) - 1 ? (size_t)(e - q - 1) : sizeof(base) - 1;
		memcpy(base, q + 1, l);
		base[l] = '\0';
		int64_t n = mc_number(base);
		if (latest)
			d->state_latest = n;
		else if (d->nlisted < MC_MAX)
			d->state_listed[d->nlisted++] = n;
	}
}

int mc_listed(const mc_dir *d, int64_t n)
{
	for (size_t i = 0; i < d->nlisted; i++)
		if (d->state_listed[i] == n)
			return 1;
	return 0;
}

void mc_scan(mc_dir *d, ckpt_vfs *vfs, const char *dir)
{
	memset(d, 0, sizeof(*d));
	d->newest_complete = -1;
	d->state_latest = -1;
	if (!vfs)
		vfs = ckpt_vfs_default();
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(ckpt_vfs_list(&names, &n, vfs, dir), CKPT_OK, "%s", ckpt_error_last()->message);
	for (size_t i = 0; i < n; i++) {
		if (strstr(names[i], "tempstate"))
			d->ntemp++;
		if (strcmp(names[i], "checkpoint") == 0) {
			char *p = ts_join(dir, names[i]);
			void *buf;
			size_t len;
			cr_assert_eq(ckpt_vfs_read_all(&buf, &len, vfs, p, 1 << 20), CKPT_OK);
			mc_parse_state(d, buf);
			ckpt_free(buf);
			free(p);
		}
		size_t l = strlen(names[i]);
		if (l <= 6 || strcmp(names[i] + l - 6, ".index") != 0 || d->n == MC_MAX)
			continue;
		names[i][l - 6] = '\0';
		int64_t num = mc_number(names[i]);
		if (num >= 0) {
			char *p = ts_join(dir, names[i]);
			mc_ckpt *c = &d->c[d->n++];
			c->number = num;
			c->value = c->counter = -1;
			c->complete = mc_complete(vfs, p, &c->value, &c->counter);
			free(p);
		}
		names[i][l - 6] = '.';
	}
	ckpt_vfs_free_list(names, n);
	for (size_t i = 1; i < d->n; i++)
		for (size_t j = i; j > 0 && d->c[j - 1].number > d->c[j].number; j--) {
			mc_ckpt t = d->c[j];
			d->c[j] = d->c[j - 1];
			d->c[j - 1] = t;
		}
	for (size_t i = 0; i < d->n; i++) {
		if (!d->c[i].complete)
			continue;
		d->ncomplete++;
		d->newest_complete = d->c[i].number;
		/* (c): a checkpoint's number is the save_counter it holds, and our saver's value */
		cr_assert_eq(d->c[i].counter, d->c[i].number, "ckpt-%lld holds save_counter %lld",
			(long long)d->c[i].number, (long long)d->c[i].counter);
		cr_assert_eq(d->c[i].value, d->c[i].number, "ckpt-%lld holds the state of save %lld",
			(long long)d->c[i].number, (long long)d->c[i].value);
	}
}
