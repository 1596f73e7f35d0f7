/*
 * libckpt — checkpoints and saved models for C trainers.
 *
 * Umbrella header: include this one. The API is split by concern:
 *   ckpt/common.h        version, status codes, last error, allocator, caps
 *   ckpt/tensor.h        dtypes, shapes, tensors, CRC32C
 *   ckpt/io.h            files and file systems (POSIX, memory, fault injection)
 *   ckpt/object_graph.h  TensorFlow's object graph and key naming
 *   ckpt/reader.h        reading and writing checkpoint files of any format
 *   ckpt/saved_model.h   a SavedModel's signatures and variable synchronization
 *   ckpt/strategy.h      strategies, scopes, replica context, all-reduce
 *   ckpt/memory.h        memory providers: replicas in device memory
 *   ckpt/replica_check.h every replica copy checksummed in place (host or device)
 *   ckpt/variable.h      plain, mirrored and sync-on-read variables
 *   ckpt/checkpoint.h    trackable objects, save / restore / load, the manager
 *   ckpt/partitioned.h   variables split along axis 0 (PartitionedVariable, ShardedVariable)
 *   ckpt/host.h          host state (step, RNG, data position) tracked by pointer
 *   ckpt/layout.h        variables and slots laid out in one caller-owned buffer
 *   ckpt/async.h         asynchronous saves (block only while staging)
 *   ckpt/gguf.h          GGUF block types (quantized tensors) to and from float32
 *   ckpt/tier.h          the memory tier: newest steps in shared memory
 */
#ifndef CKPT_CKPT_H
#define CKPT_CKPT_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/io.h"
#include "ckpt/object_graph.h"
#include "ckpt/reader.h"
#include "ckpt/saved_model.h"
#include "ckpt/strategy.h"
#include "ckpt/memory.h"
#include "ckpt/replica_check.h"
#include "ckpt/variable.h"
#include "ckpt/checkpoint.h"
#include "ckpt/partitioned.h"
#include "ckpt/host.h"
#include "ckpt/layout.h"
#include "ckpt/async.h"
#include "ckpt/tier.h"
#include "ckpt/s3.h"
#include "ckpt/gguf.h"

#endif
