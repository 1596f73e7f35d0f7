/*
 * A small pool of helper threads for the bundle data path (chunked pread +
 * crc32c, and the crc that runs beside a write).
 *
 * Why not an OpenMP team: measured on the shared 2-vCPU VM, a team per big
 * entry made restores 3-5x slower under load. A parallel region ends in a
 * barrier that waits for every team thread, even one the kernel has not
 * scheduled yet, and libgomp's idle threads spin after each region, taking
 * the CPU from the thread that still has work. Here the caller claims chunks
 * itself and never waits for a helper that has not started: a job finishes
 * as soon as all its chunks are done, whoever ran them, and helpers sleep on
 * a condition variable between jobs.
 *
 * One job runs at a time; a second caller (another thread, or a job started
 * from inside a chunk) runs its chunks alone, as do callers inside an active
 * OpenMP parallel region when nesting is off. Helpers are created on first
 * use (omp_get_max_threads() - 1 of them, so OMP_NUM_THREADS applies) and live
 * until the process exits; a forked child starts without any.
 */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "tfb.h"

#define MAX_HELPERS 63

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;    /* helpers: a job was posted */
	pthread_cond_t idle;    /* owner: a job's last chunk finished, or a helper let go of it */
	tfb_par_job *cur;       /* the posted job, NULL when none */
	unsigned long gen;      /* bumped per posted job */
	int nhelpers;
	int tried;              /* helpers created (or creation failed) in this process */
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0 };

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void prepare(void) { pthread_mutex_lock(&pool.lock); }
static void parent(void) { pthread_mutex_unlock(&pool.lock); }
static void child(void)
{
	/* the helpers did not survive the fork */
	pthread_mutex_init(&pool.lock, NULL);
	pthread_cond_init(&pool.wake, NULL);
	pthread_cond_init(&pool.idle, NULL);
	pool.cur = NULL;
	pool.nhelpers = 0;
	pool.tried = 0;
}
static void register_atfork(void) { pthread_atfork(prepare, parent, child); }

int tfb_par_help(tfb_par_job *j)
{
	size_t k = atomic_fetch_add(&j->next, 1);
	if (k >= j->n)
		return 0;
	j->fn(j->arg, k);
	if (atomic_fetch_add(&j->done, 1) + 1 == j->n && j->posted) {
		pthread_mutex_lock(&pool.lock);
		pthread_cond_broadcast(&pool.idle);
		pthread_mutex_unlock(&pool.lock);
	}
	return 1;
}

/* Claim and run chunks until none is left. */
static void run_chunks(tfb_par_job *j)
{
	while (tfb_par_help(j))
		;
}

static void *helper_main(void *unused)
{
	(void)unused;
	unsigned long seen = 0;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		while (!pool.cur || pool.gen == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		tfb_par_job *j = pool.cur;
		seen = pool.gen;
		j->users++;
		pthread_mutex_unlock(&pool.lock);
		run_chunks(j);
		pthread_mutex_lock(&pool.lock);
		if (--j->users == 0)
			pthread_cond_broadcast(&pool.idle);
	}
	return NULL;
}

/* Under pool.lock: create the helpers once per process. */
static void spawn_helpers(void)
{
	pool.tried = 1;
	int want = omp_get_max_threads() - 1;
	if (want > MAX_HELPERS)
		want = MAX_HELPERS;
	pthread_attr_t a;
	if (want <= 0 || pthread_attr_init(&a) != 0)
		return;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 1u << 20);
	for (int i = 0; i < want; i++) {
		pthread_t t;
		if (pthread_create(&t, &a, helper_main, NULL) != 0)
			break;
		pool.nhelpers++;
	}
	pthread_attr_destroy(&a);
}

int tfb_par_threads(void)
{
	if (omp_get_active_level() >= omp_get_max_active_levels())
		return 1;
	int t = omp_get_max_threads();
	return t > MAX_HELPERS + 1 ? MAX_HELPERS + 1 : (t > 1 ? t : 1);
}

int tfb_par_start(tfb_par_job *j, size_t n, tfb_par_fn fn, void *arg)
{
	j->fn = fn;
	j->arg = arg;
	j->n = n;
	atomic_init(&j->next, 0);
	atomic_init(&j->done, 0);
	j->users = 0;
	j->posted = 0;
	if (n < 2 || tfb_par_threads() < 2)
		return 0;
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&pool.lock);
	if (!pool.tried)
		spawn_helpers();
	if (!pool.cur && pool.nhelpers > 0) {
		j->posted = 1;
		pool.cur = j;
		pool.gen++;
		pthread_cond_broadcast(&pool.wake);
	}
	pthread_mutex_unlock(&pool.lock);
	return j->posted;
}

void tfb_par_finish(tfb_par_job *j)
{
	run_chunks(j);
	if (!j->posted)
		return;
	pthread_mutex_lock(&pool.lock);
	while (atomic_load(&j->done) < j->n)
		pthread_cond_wait(&pool.idle, &pool.lock);
	pool.cur = NULL;
	while (j->users > 0)
		pthread_cond_wait(&pool.idle, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
}

void tfb_par_for(size_t n, tfb_par_fn fn, void *arg)
{
	tfb_par_job j;
	tfb_par_start(&j, n, fn, arg);
	tfb_par_finish(&j);
}

void tfb_first_error_init(tfb_first_error *e)
{
	atomic_init(&e->failed, 0);
	pthread_mutex_init(&e->lock, NULL);
	e->at = SIZE_MAX;
	memset(&e->err, 0, sizeof(e->err));
}

void tfb_first_error_note(tfb_first_error *e, size_t index)
{
	atomic_store(&e->failed, 1);
	pthread_mutex_lock(&e->lock);
	if (index < e->at) {
		e->at = index;
		ckpt__error_capture(&e->err);
	}
	pthread_mutex_unlock(&e->lock);
	ckpt_error_clear(); /* a helper thread keeps no error strings */
}

int tfb_first_error_finish(tfb_first_error *e)
{
	int rc = e->at != SIZE_MAX ? ckpt__error_raise(&e->err) : CKPT_OK;
	ckpt__error_slot_clear(&e->err);
	pthread_mutex_destroy(&e->lock);
	return rc;
}
