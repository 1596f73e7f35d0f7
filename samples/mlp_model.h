/*
 * The MLP shared by the sample trainers: a deterministic RNG, the dataset,
 * the model (Dense 8->16 relu -> Dense 16->1), Keras' Adam, the MSE loss,
 * a MeanAbsoluteError metric, and the mirrored training loop.
 *
 * Checkpoint layout (TF2 / Keras key layout, so TensorFlow reads it):
 *
 *   model/layer_with_weights-{0,1}/{kernel,bias}
 *   model/layer_with_weights-k/{kernel,bias}/.OPTIMIZER_SLOT/optimizer/{m,v}
 *   optimizer/{iter,learning_rate,beta_1,beta_2,decay}
 *   metric/{total,count}          sync-on-read, SUM
 *   step, rng_state, data_position   the loop's own state: host memory (mlp_model.state)
 *                                    tracked by pointer, one copy, not replicated
 *   save_counter
 *
 * Everything that owns state is created by mlp_build_model() and
 * mlp_build_slots(), which must run inside the strategy's scope. The
 * dataset and the loop (mlp_fit) need no scope. Every save checks that the
 * mirrored copies are still identical (ckpt_checkpoint_options.check_mirrored).
 */
#ifndef MLP_MODEL_H
#define MLP_MODEL_H

#include <stdint.h>
#include <ckpt/ckpt.h>

#define MLP_SAMPLES 512
#define MLP_IN 8
#define MLP_HIDDEN 16
#define MLP_OUT 1
#define MLP_GLOBAL_BATCH 64
#define MLP_STEPS_PER_EPOCH (MLP_SAMPLES / MLP_GLOBAL_BATCH)
/* W1, b1, W2, b2 flattened: the all-reduced gradient vector. */
#define MLP_NPARAMS (MLP_IN * MLP_HIDDEN + MLP_HIDDEN + MLP_HIDDEN * MLP_OUT + MLP_OUT)

/* ---- deterministic RNG: xoshiro256** seeded by splitmix64 ---- */

/** Four words of state, nothing cached: the state alone resumes the stream. */
typedef struct mlp_rng {
	uint64_t s[4];
} mlp_rng;

void mlp_rng_seed(mlp_rng *r, uint64_t seed);
uint64_t mlp_rng_next(mlp_rng *r);
/** Uniform in [0, 1) with 53 random bits. */
double mlp_rng_uniform(mlp_rng *r);
/** Fill dst with N(0,1) values (Box-Muller, both values of each pair used). */
void mlp_rng_normal_fill(mlp_rng *r, float *dst, int n);

/* ---- dataset ---- */

typedef struct mlp_data {
	float x[MLP_SAMPLES * MLP_IN];
	float y[MLP_SAMPLES * MLP_OUT];
} mlp_data;

/** x ~ N(0,1) of 512x8, then y ~ N(0,1) of 512x1, drawn from `r`. */
void mlp_data_make(mlp_data *d, mlp_rng *r);

/* ---- model, optimizer, metric, training state ---- */

/**
 * What a bit-exact resume needs beyond weights and slots: plain memory the
 * loop updates directly, saved and restored in place (ckpt/host.h).
 */
typedef struct mlp_train_state {
	int64_t step;              /* global steps done */
	uint64_t rng_state[4];     /* the RNG at the start of the current epoch (saved as int64 [4]) */
	int64_t data_position;     /* samples of the current epoch done */
} mlp_train_state;

typedef struct mlp_model {
	ckpt_checkpoint *ckpt;          /* root of the object tree */
	ckpt_object *model, *dense[2], *optimizer, *metric;
	ckpt_variable *kernel[2], *bias[2];
	ckpt_variable *iter, *learning_rate, *beta_1, *beta_2, *decay;
	ckpt_variable *m[4], *v[4];     /* Adam slots of kernel0, bias0, kernel1, bias1 */
	ckpt_variable *total, *count;   /* MeanAbsoluteError state */
	ckpt_variable *save_counter;
	mlp_train_state state;          /* tracked by pointer: `m` must not move once built */
} mlp_model;

/**
 * build_model(): create the model, the optimizer (iter and hyper-parameters),
 * the metric and the custom state through the current strategy: call it
 * inside the strategy's scope. Kernels get Glorot-uniform values from
 * `init`, m->state.rng_state gets `init`'s state after that.
 */
int mlp_build_model(mlp_model *m, mlp_rng *init);

/**
 * Create Adam's m and v slots, as Keras does on the first apply_gradients.
 * Call it inside the scope, after any restore: values the restore held for
 * the slots are applied as they are created (restore-on-create).
 */
int mlp_build_slots(mlp_model *m);

/**
 * Point `m` at the variables of an existing tree (for example one made by
 * ckpt_checkpoint_load) by object path; `m` takes over `ckpt`. Slots that
 * the tree lacks are left NULL; m->state is zero (a loaded tree holds the
 * loop state as variables: enough for mlp_train_step, not for mlp_fit).
 */
int mlp_model_bind(mlp_model *m, ckpt_checkpoint *ckpt);

void mlp_model_free(mlp_model *m);

/** Epochs completed so far (step / steps per epoch). */
int64_t mlp_epochs_done(const mlp_model *m);

/** Per-epoch result of mlp_fit (the last epoch run). */
typedef struct mlp_epoch_result {
	double loss;   /* mean of the global-batch MSE over the epoch's steps */
	double mae;    /* metric total / count, aggregated over replicas */
} mlp_epoch_result;

/**
 * The custom training loop (outside any scope): run epochs until
 * `until_epoch` epochs are done, one ckpt_strategy_run per global batch of
 * 64 split evenly across replicas, gradients all-reduced, Adam applied on
 * every replica's copy. Shuffles each epoch from the RNG state variable,
 * resets the metric at each epoch start (as Keras does), and saves a
 * checkpoint per epoch through `mgr` (may be NULL). Prints one line per
 * epoch with a progress bar.
 */
int mlp_fit(mlp_model *m, ckpt_strategy *s, const mlp_data *d, ckpt_manager *mgr, int64_t until_epoch,
	mlp_epoch_result *last);

/**
 * Print one line describing the live tree: how many variables of each kind
 * and how many copies each holds ("19 mirrored x2, 2 sync-on-read x2").
 */
int mlp_print_variables(mlp_model *m, const char *indent);

/**
 * One training step on global batch `batch` (0..7) in dataset order, without
 * touching the custom state: for programs that only need a step.
 */
int mlp_train_step(mlp_model *m, ckpt_strategy *s, const mlp_data *d, int batch, float *loss);

/** Print the library's last error as "prefix: <formatted error>" on stderr; returns `rc`. */
int mlp_report(const char *prefix, int rc);

/** Parse a positive int option value; exits with status 2 on a bad value. */
int mlp_parse_int(const char *prog, const char *flag, const char *value);

/** This replica's copy of `v` for an update (ckpt_variable_local), typed. */
int mlp_local_f32(ckpt_variable *v, float **out);
int mlp_local_i64(ckpt_variable *v, int64_t **out);

#endif
