// libckpt 0.1 -> 0.2: the public API keeps the rules ckpt/common.h states.
// A semantic patch for Coccinelle (spatch); it rewrites callers, not the
// library's own definitions. Run it on your code with
//   spatch --sp-file scripts/api_0_2.cocci --in-place --dir YOUR_SRC \
//          -I /path/to/include --all-includes
// (scripts/api_0_2_apply.sh runs it over this repository). It is idempotent:
// a second run changes nothing.
//
//  1. Output parameters first in every int function (same names):
//       ckpt_reader_read(r, i, &t)      -> ckpt_reader_read(&t, r, i)
//  2. A borrowed result is the return value (NULL on failure, the last error
//     set); ckpt_status_of(p) turns it back into a status, so every call
//     site keeps its meaning:
//       ckpt_object_get_child(&c, o, "x") -> ckpt_status_of(c = ckpt_object_child(o, "x"))
//       rc = ckpt_manager_save(NULL, m);  -> rc = ckpt_status_of(ckpt_manager_save(m));
//  3. One naming: counts num_, getters bare:
//       ckpt_reader_count(r)            -> ckpt_reader_num_entries(r)
//
// The reorders are told apart from calls already in the 0.2 order by the
// type of the handle argument (so give spatch the include paths), or, where
// the old output comes last, by that output being &x or NULL.

// ---- 3. renames ----
@@
symbol ckpt_tracked_list_count;
@@
- ckpt_tracked_list_count
+ ckpt_tracked_list_num_entries

@@
symbol ckpt_restore_status_unmatched_count;
@@
- ckpt_restore_status_unmatched_count
+ ckpt_restore_status_num_unmatched

@@
symbol ckpt_restore_status_unrestored_count;
@@
- ckpt_restore_status_unrestored_count
+ ckpt_restore_status_num_unrestored

@@
symbol ckpt_restore_status_restored_count;
@@
- ckpt_restore_status_restored_count
+ ckpt_restore_status_num_restored

@@
symbol ckpt_manager_count;
@@
- ckpt_manager_count
+ ckpt_manager_num_checkpoints

@@
symbol ckpt_reader_count;
@@
- ckpt_reader_count
+ ckpt_reader_num_entries

@@
symbol ckpt_reader_kv_count;
@@
- ckpt_reader_kv_count
+ ckpt_reader_num_kv

@@
symbol ckpt_strategy_get_kind;
@@
- ckpt_strategy_get_kind
+ ckpt_strategy_kind_of

@@
symbol ckpt_strategy_get_methods;
@@
- ckpt_strategy_get_methods
+ ckpt_strategy_method_table

// ---- 1. outputs first ----
@ckpt_io_pread_typed@
typedef ckpt_io;
{ckpt_io *, const ckpt_io *} io;
expression buf, n, off, got;
@@
- ckpt_io_pread(io, buf, n, off, got)
+ ckpt_io_pread(got, io, buf, n, off)

@ckpt_io_pread_last_out@
expression io, buf, n, off, X;
@@
(
- ckpt_io_pread(io, buf, n, off, &X)
+ ckpt_io_pread(&X, io, buf, n, off)
|
- ckpt_io_pread(io, buf, n, off, NULL)
+ ckpt_io_pread(NULL, io, buf, n, off)
)

@ckpt_io_pread_direct_typed@
typedef ckpt_io;
{ckpt_io *, const ckpt_io *} io;
expression buf, n, off, got;
@@
- ckpt_io_pread_direct(io, buf, n, off, got)
+ ckpt_io_pread_direct(got, io, buf, n, off)

@ckpt_io_pread_direct_last_out@
expression io, buf, n, off, X;
@@
(
- ckpt_io_pread_direct(io, buf, n, off, &X)
+ ckpt_io_pread_direct(&X, io, buf, n, off)
|
- ckpt_io_pread_direct(io, buf, n, off, NULL)
+ ckpt_io_pread_direct(NULL, io, buf, n, off)
)

@ckpt_io_size_typed@
typedef ckpt_io;
{ckpt_io *, const ckpt_io *} io;
expression out;
@@
- ckpt_io_size(io, out)
+ ckpt_io_size(out, io)

@ckpt_io_size_last_out@
expression E, X, Y;
@@
(
 ckpt_io_size(&Y, &X)
|
- ckpt_io_size(E, &X)
+ ckpt_io_size(&X, E)
)

@ckpt_vfs_open_typed@
typedef ckpt_vfs;
{ckpt_vfs *, const ckpt_vfs *} vfs;
expression path, flags, out;
@@
- ckpt_vfs_open(vfs, path, flags, out)
+ ckpt_vfs_open(out, vfs, path, flags)

@ckpt_vfs_open_last_out@
expression vfs, path, flags, X;
@@
(
- ckpt_vfs_open(vfs, path, flags, &X)
+ ckpt_vfs_open(&X, vfs, path, flags)
|
- ckpt_vfs_open(vfs, path, flags, NULL)
+ ckpt_vfs_open(NULL, vfs, path, flags)
)

@ckpt_vfs_exists_typed@
typedef ckpt_vfs;
{ckpt_vfs *, const ckpt_vfs *} vfs;
expression path, is_dir;
@@
- ckpt_vfs_exists(vfs, path, is_dir)
+ ckpt_vfs_exists(is_dir, vfs, path)

@ckpt_vfs_exists_last_out@
expression vfs, path, X;
@@
(
- ckpt_vfs_exists(vfs, path, &X)
+ ckpt_vfs_exists(&X, vfs, path)
|
- ckpt_vfs_exists(vfs, path, NULL)
+ ckpt_vfs_exists(NULL, vfs, path)
)

@ckpt_vfs_list_typed@
typedef ckpt_vfs;
{ckpt_vfs *, const ckpt_vfs *} vfs;
expression dir, names, count;
@@
- ckpt_vfs_list(vfs, dir, names, count)
+ ckpt_vfs_list(names, count, vfs, dir)

@ckpt_vfs_list_last_out@
expression vfs, dir, names, X;
@@
(
- ckpt_vfs_list(vfs, dir, names, &X)
+ ckpt_vfs_list(names, &X, vfs, dir)
|
- ckpt_vfs_list(vfs, dir, names, NULL)
+ ckpt_vfs_list(names, NULL, vfs, dir)
)

@ckpt_vfs_read_all_typed@
typedef ckpt_vfs;
{ckpt_vfs *, const ckpt_vfs *} vfs;
expression path, max, buf, n;
@@
- ckpt_vfs_read_all(vfs, path, max, buf, n)
+ ckpt_vfs_read_all(buf, n, vfs, path, max)

@ckpt_vfs_read_all_last_out@
expression vfs, path, max, buf, X;
@@
(
- ckpt_vfs_read_all(vfs, path, max, buf, &X)
+ ckpt_vfs_read_all(buf, &X, vfs, path, max)
|
- ckpt_vfs_read_all(vfs, path, max, buf, NULL)
+ ckpt_vfs_read_all(buf, NULL, vfs, path, max)
)

@ckpt_object_graph_serialize_typed@
typedef ckpt_object_graph;
{ckpt_object_graph *, const ckpt_object_graph *} g;
expression buf, n;
@@
- ckpt_object_graph_serialize(g, buf, n)
+ ckpt_object_graph_serialize(buf, n, g)

@ckpt_object_graph_serialize_last_out@
expression G, B, X;
@@
(
 ckpt_object_graph_serialize(&G, B, X)
|
- ckpt_object_graph_serialize(G, B, &X)
+ ckpt_object_graph_serialize(B, &X, G)
|
- ckpt_object_graph_serialize(G, B, NULL)
+ ckpt_object_graph_serialize(B, NULL, G)
)

@ckpt_object_graph_path_typed@
typedef ckpt_object_graph;
{ckpt_object_graph *, const ckpt_object_graph *} g;
expression node, out;
@@
- ckpt_object_graph_path(g, node, out)
+ ckpt_object_graph_path(out, g, node)

@ckpt_object_graph_path_last_out@
expression g, node, X;
@@
(
- ckpt_object_graph_path(g, node, &X)
+ ckpt_object_graph_path(&X, g, node)
|
- ckpt_object_graph_path(g, node, NULL)
+ ckpt_object_graph_path(NULL, g, node)
)

@ckpt_key_escape_typed@
{char *, const char *} name;
expression out;
@@
- ckpt_key_escape(name, out)
+ ckpt_key_escape(out, name)

@ckpt_key_escape_last_out@
expression name, X;
@@
(
- ckpt_key_escape(name, &X)
+ ckpt_key_escape(&X, name)
|
- ckpt_key_escape(name, NULL)
+ ckpt_key_escape(NULL, name)
)

@ckpt_key_attribute_typed@
{char *, const char *} object_path;
expression attr, out;
@@
- ckpt_key_attribute(object_path, attr, out)
+ ckpt_key_attribute(out, object_path, attr)

@ckpt_key_attribute_last_out@
expression object_path, attr, X;
@@
(
- ckpt_key_attribute(object_path, attr, &X)
+ ckpt_key_attribute(&X, object_path, attr)
|
- ckpt_key_attribute(object_path, attr, NULL)
+ ckpt_key_attribute(NULL, object_path, attr)
)

@ckpt_partitioned_part_rows_typed@
typedef ckpt_partitioned;
{ckpt_partitioned *, const ckpt_partitioned *} p;
expression i, first, rows;
@@
- ckpt_partitioned_part_rows(p, i, first, rows)
+ ckpt_partitioned_part_rows(first, rows, p, i)

@ckpt_partitioned_part_rows_last_out@
expression p, i, first, X;
@@
(
- ckpt_partitioned_part_rows(p, i, first, &X)
+ ckpt_partitioned_part_rows(first, &X, p, i)
|
- ckpt_partitioned_part_rows(p, i, first, NULL)
+ ckpt_partitioned_part_rows(first, NULL, p, i)
)

@ckpt_reader_find_typed@
typedef ckpt_reader;
{ckpt_reader *, const ckpt_reader *} r;
expression name, index;
@@
- ckpt_reader_find(r, name, index)
+ ckpt_reader_find(index, r, name)

@ckpt_reader_find_last_out@
expression r, name, X;
@@
(
- ckpt_reader_find(r, name, &X)
+ ckpt_reader_find(&X, r, name)
|
- ckpt_reader_find(r, name, NULL)
+ ckpt_reader_find(NULL, r, name)
)

@ckpt_reader_read_typed@
typedef ckpt_reader;
{ckpt_reader *, const ckpt_reader *} r;
expression i, out;
@@
- ckpt_reader_read(r, i, out)
+ ckpt_reader_read(out, r, i)

@ckpt_reader_read_last_out@
expression r, i, X;
@@
(
- ckpt_reader_read(r, i, &X)
+ ckpt_reader_read(&X, r, i)
|
- ckpt_reader_read(r, i, NULL)
+ ckpt_reader_read(NULL, r, i)
)

@ckpt_shape_num_elements_typed@
typedef ckpt_shape;
{ckpt_shape *, const ckpt_shape *} s;
expression out;
@@
- ckpt_shape_num_elements(s, out)
+ ckpt_shape_num_elements(out, s)

@ckpt_shape_num_elements_call@
identifier F;
expression list ES;
expression X;
@@
- ckpt_shape_num_elements(F(ES), X)
+ ckpt_shape_num_elements(X, F(ES))

@ckpt_shape_nbytes_typed@
typedef ckpt_shape;
{ckpt_shape *, const ckpt_shape *} s;
expression dt, out;
@@
- ckpt_shape_nbytes(s, dt, out)
+ ckpt_shape_nbytes(out, s, dt)

@ckpt_shape_nbytes_last_out@
expression s, dt, X;
@@
(
- ckpt_shape_nbytes(s, dt, &X)
+ ckpt_shape_nbytes(&X, s, dt)
|
- ckpt_shape_nbytes(s, dt, NULL)
+ ckpt_shape_nbytes(NULL, s, dt)
)

@ckpt_variable_read_tensor_typed@
typedef ckpt_variable;
{ckpt_variable *, const ckpt_variable *} v;
expression out;
@@
- ckpt_variable_read_tensor(v, out)
+ ckpt_variable_read_tensor(out, v)

@ckpt_variable_read_tensor_last_out@
expression E, X, Y;
@@
(
 ckpt_variable_read_tensor(&Y, &X)
|
- ckpt_variable_read_tensor(E, &X)
+ ckpt_variable_read_tensor(&X, E)
)

@ckpt_variable_read_copy_typed@
typedef ckpt_variable;
{ckpt_variable *, const ckpt_variable *} v;
expression i, dst;
@@
- ckpt_variable_read_copy(v, i, dst)
+ ckpt_variable_read_copy(dst, v, i)

@ckpt_variable_read_copy_last_out@
expression v, i, X;
@@
(
- ckpt_variable_read_copy(v, i, &X)
+ ckpt_variable_read_copy(&X, v, i)
|
- ckpt_variable_read_copy(v, i, NULL)
+ ckpt_variable_read_copy(NULL, v, i)
)

// ---- 2. borrowed results returned ----
@@
expression m, s, P;
type T;
@@
(
- ckpt_manager_save_async(NULL, m, s)
+ ckpt_status_of(ckpt_manager_save_async(m, s))
|
- ckpt_manager_save_async(&P, m, s)
+ ckpt_status_of(P = ckpt_manager_save_async(m, s))
|
- ckpt_manager_save_async((T)&P, m, s)
+ ckpt_status_of(P = ckpt_manager_save_async(m, s))
|
- ckpt_manager_save_async(P, m, s)
+ ckpt_status_of(P ? (*P = ckpt_manager_save_async(m, s)) : ckpt_manager_save_async(m, s))
)

@@
expression parent, name, P;
type T;
@@
(
- ckpt_object_new_child(NULL, parent, name)
+ ckpt_status_of(ckpt_object_new_child(parent, name))
|
- ckpt_object_new_child(&P, parent, name)
+ ckpt_status_of(P = ckpt_object_new_child(parent, name))
|
- ckpt_object_new_child((T)&P, parent, name)
+ ckpt_status_of(P = ckpt_object_new_child(parent, name))
|
- ckpt_object_new_child(P, parent, name)
+ ckpt_status_of(P ? (*P = ckpt_object_new_child(parent, name)) : ckpt_object_new_child(parent, name))
)

@@
expression obj, local, var, dt, shape, o, P;
type T;
@@
(
- ckpt_object_add_variable(NULL, obj, local, var, dt, shape, o)
+ ckpt_status_of(ckpt_object_add_variable(obj, local, var, dt, shape, o))
|
- ckpt_object_add_variable(&P, obj, local, var, dt, shape, o)
+ ckpt_status_of(P = ckpt_object_add_variable(obj, local, var, dt, shape, o))
|
- ckpt_object_add_variable((T)&P, obj, local, var, dt, shape, o)
+ ckpt_status_of(P = ckpt_object_add_variable(obj, local, var, dt, shape, o))
|
- ckpt_object_add_variable(P, obj, local, var, dt, shape, o)
+ ckpt_status_of(P ? (*P = ckpt_object_add_variable(obj, local, var, dt, shape, o)) : ckpt_object_add_variable(obj, local, var, dt, shape, o))
)

@@
expression obj, attr, suffix, var, dt, shape, o, P;
type T;
@@
(
- ckpt_object_add_attribute_tensor(NULL, obj, attr, suffix, var, dt, shape, o)
+ ckpt_status_of(ckpt_object_add_attribute_tensor(obj, attr, suffix, var, dt, shape, o))
|
- ckpt_object_add_attribute_tensor(&P, obj, attr, suffix, var, dt, shape, o)
+ ckpt_status_of(P = ckpt_object_add_attribute_tensor(obj, attr, suffix, var, dt, shape, o))
|
- ckpt_object_add_attribute_tensor((T)&P, obj, attr, suffix, var, dt, shape, o)
+ ckpt_status_of(P = ckpt_object_add_attribute_tensor(obj, attr, suffix, var, dt, shape, o))
|
- ckpt_object_add_attribute_tensor(P, obj, attr, suffix, var, dt, shape, o)
+ ckpt_status_of(P ? (*P = ckpt_object_add_attribute_tensor(obj, attr, suffix, var, dt, shape, o)) : ckpt_object_add_attribute_tensor(obj, attr, suffix, var, dt, shape, o))
)

@@
expression obj, attr, suffix, P;
type T;
@@
(
- ckpt_object_get_attribute_tensor(NULL, obj, attr, suffix)
+ ckpt_status_of(ckpt_object_attribute_tensor(obj, attr, suffix))
|
- ckpt_object_get_attribute_tensor(&P, obj, attr, suffix)
+ ckpt_status_of(P = ckpt_object_attribute_tensor(obj, attr, suffix))
|
- ckpt_object_get_attribute_tensor((T)&P, obj, attr, suffix)
+ ckpt_status_of(P = ckpt_object_attribute_tensor(obj, attr, suffix))
|
- ckpt_object_get_attribute_tensor(P, obj, attr, suffix)
+ ckpt_status_of(P ? (*P = ckpt_object_attribute_tensor(obj, attr, suffix)) : ckpt_object_attribute_tensor(obj, attr, suffix))
)

@@
expression obj, name, P;
type T;
@@
(
- ckpt_object_get_child(NULL, obj, name)
+ ckpt_status_of(ckpt_object_child(obj, name))
|
- ckpt_object_get_child(&P, obj, name)
+ ckpt_status_of(P = ckpt_object_child(obj, name))
|
- ckpt_object_get_child((T)&P, obj, name)
+ ckpt_status_of(P = ckpt_object_child(obj, name))
|
- ckpt_object_get_child(P, obj, name)
+ ckpt_status_of(P ? (*P = ckpt_object_child(obj, name)) : ckpt_object_child(obj, name))
)

@@
expression obj, name, P;
type T;
@@
(
- ckpt_object_get_variable(NULL, obj, name)
+ ckpt_status_of(ckpt_object_variable(obj, name))
|
- ckpt_object_get_variable(&P, obj, name)
+ ckpt_status_of(P = ckpt_object_variable(obj, name))
|
- ckpt_object_get_variable((T)&P, obj, name)
+ ckpt_status_of(P = ckpt_object_variable(obj, name))
|
- ckpt_object_get_variable(P, obj, name)
+ ckpt_status_of(P ? (*P = ckpt_object_variable(obj, name)) : ckpt_object_variable(obj, name))
)

@@
expression from, path, P;
type T;
@@
(
- ckpt_object_find(NULL, from, path)
+ ckpt_status_of(ckpt_object_find(from, path))
|
- ckpt_object_find(&P, from, path)
+ ckpt_status_of(P = ckpt_object_find(from, path))
|
- ckpt_object_find((T)&P, from, path)
+ ckpt_status_of(P = ckpt_object_find(from, path))
|
- ckpt_object_find(P, from, path)
+ ckpt_status_of(P ? (*P = ckpt_object_find(from, path)) : ckpt_object_find(from, path))
)

@@
expression opt, primary, slot, o, P;
type T;
@@
(
- ckpt_optimizer_create_slot(NULL, opt, primary, slot, o)
+ ckpt_status_of(ckpt_optimizer_create_slot(opt, primary, slot, o))
|
- ckpt_optimizer_create_slot(&P, opt, primary, slot, o)
+ ckpt_status_of(P = ckpt_optimizer_create_slot(opt, primary, slot, o))
|
- ckpt_optimizer_create_slot((T)&P, opt, primary, slot, o)
+ ckpt_status_of(P = ckpt_optimizer_create_slot(opt, primary, slot, o))
|
- ckpt_optimizer_create_slot(P, opt, primary, slot, o)
+ ckpt_status_of(P ? (*P = ckpt_optimizer_create_slot(opt, primary, slot, o)) : ckpt_optimizer_create_slot(opt, primary, slot, o))
)

@@
expression opt, primary, slot, P;
type T;
@@
(
- ckpt_optimizer_get_slot(NULL, opt, primary, slot)
+ ckpt_status_of(ckpt_optimizer_slot(opt, primary, slot))
|
- ckpt_optimizer_get_slot(&P, opt, primary, slot)
+ ckpt_status_of(P = ckpt_optimizer_slot(opt, primary, slot))
|
- ckpt_optimizer_get_slot((T)&P, opt, primary, slot)
+ ckpt_status_of(P = ckpt_optimizer_slot(opt, primary, slot))
|
- ckpt_optimizer_get_slot(P, opt, primary, slot)
+ ckpt_status_of(P ? (*P = ckpt_optimizer_slot(opt, primary, slot)) : ckpt_optimizer_slot(opt, primary, slot))
)

@@
expression ck, P;
type T;
@@
(
- ckpt_checkpoint_save_counter_variable(NULL, ck)
+ ckpt_status_of(ckpt_checkpoint_save_counter_variable(ck))
|
- ckpt_checkpoint_save_counter_variable(&P, ck)
+ ckpt_status_of(P = ckpt_checkpoint_save_counter_variable(ck))
|
- ckpt_checkpoint_save_counter_variable((T)&P, ck)
+ ckpt_status_of(P = ckpt_checkpoint_save_counter_variable(ck))
|
- ckpt_checkpoint_save_counter_variable(P, ck)
+ ckpt_status_of(P ? (*P = ckpt_checkpoint_save_counter_variable(ck)) : ckpt_checkpoint_save_counter_variable(ck))
)

@@
expression ck, prefix, P;
type T;
@@
(
- ckpt_checkpoint_save(NULL, ck, prefix)
+ ckpt_status_of(ckpt_checkpoint_save(ck, prefix))
|
- ckpt_checkpoint_save(&P, ck, prefix)
+ ckpt_status_of(P = ckpt_checkpoint_save(ck, prefix))
|
- ckpt_checkpoint_save((T)&P, ck, prefix)
+ ckpt_status_of(P = ckpt_checkpoint_save(ck, prefix))
|
- ckpt_checkpoint_save(P, ck, prefix)
+ ckpt_status_of(P ? (*P = ckpt_checkpoint_save(ck, prefix)) : ckpt_checkpoint_save(ck, prefix))
)

@@
expression ck, path, P;
type T;
@@
(
- ckpt_checkpoint_find_variable(NULL, ck, path)
+ ckpt_status_of(ckpt_checkpoint_find_variable(ck, path))
|
- ckpt_checkpoint_find_variable(&P, ck, path)
+ ckpt_status_of(P = ckpt_checkpoint_find_variable(ck, path))
|
- ckpt_checkpoint_find_variable((T)&P, ck, path)
+ ckpt_status_of(P = ckpt_checkpoint_find_variable(ck, path))
|
- ckpt_checkpoint_find_variable(P, ck, path)
+ ckpt_status_of(P ? (*P = ckpt_checkpoint_find_variable(ck, path)) : ckpt_checkpoint_find_variable(ck, path))
)

@@
expression m, P;
type T;
@@
(
- ckpt_manager_save(NULL, m)
+ ckpt_status_of(ckpt_manager_save(m))
|
- ckpt_manager_save(&P, m)
+ ckpt_status_of(P = ckpt_manager_save(m))
|
- ckpt_manager_save((T)&P, m)
+ ckpt_status_of(P = ckpt_manager_save(m))
|
- ckpt_manager_save(P, m)
+ ckpt_status_of(P ? (*P = ckpt_manager_save(m)) : ckpt_manager_save(m))
)

@@
expression m, number, P;
type T;
@@
(
- ckpt_manager_save_number(NULL, m, number)
+ ckpt_status_of(ckpt_manager_save_number(m, number))
|
- ckpt_manager_save_number(&P, m, number)
+ ckpt_status_of(P = ckpt_manager_save_number(m, number))
|
- ckpt_manager_save_number((T)&P, m, number)
+ ckpt_status_of(P = ckpt_manager_save_number(m, number))
|
- ckpt_manager_save_number(P, m, number)
+ ckpt_status_of(P ? (*P = ckpt_manager_save_number(m, number)) : ckpt_manager_save_number(m, number))
)

@@
expression m, P;
type T;
@@
(
- ckpt_manager_latest_valid(NULL, m)
+ ckpt_status_of(ckpt_manager_latest_valid(m))
|
- ckpt_manager_latest_valid(&P, m)
+ ckpt_status_of(P = ckpt_manager_latest_valid(m))
|
- ckpt_manager_latest_valid((T)&P, m)
+ ckpt_status_of(P = ckpt_manager_latest_valid(m))
|
- ckpt_manager_latest_valid(P, m)
+ ckpt_status_of(P ? (*P = ckpt_manager_latest_valid(m)) : ckpt_manager_latest_valid(m))
)

@@
expression st, m, P;
type T;
@@
(
- ckpt_manager_restore_latest(st, NULL, m)
+ ckpt_status_of(ckpt_manager_restore_latest(st, m))
|
- ckpt_manager_restore_latest(st, &P, m)
+ ckpt_status_of(P = ckpt_manager_restore_latest(st, m))
|
- ckpt_manager_restore_latest(st, (T)&P, m)
+ ckpt_status_of(P = ckpt_manager_restore_latest(st, m))
|
- ckpt_manager_restore_latest(st, P, m)
+ ckpt_status_of(P ? (*P = ckpt_manager_restore_latest(st, m)) : ckpt_manager_restore_latest(st, m))
)

@@
expression vfs, path, n, P;
type T;
@@
(
- ckpt_vfs_memory_get(vfs, path, NULL, n)
+ ckpt_status_of(ckpt_vfs_memory_get(n, vfs, path))
|
- ckpt_vfs_memory_get(vfs, path, &P, n)
+ ckpt_status_of(P = ckpt_vfs_memory_get(n, vfs, path))
|
- ckpt_vfs_memory_get(vfs, path, (T)&P, n)
+ ckpt_status_of(P = ckpt_vfs_memory_get(n, vfs, path))
|
- ckpt_vfs_memory_get(vfs, path, P, n)
+ ckpt_status_of(P ? (*P = ckpt_vfs_memory_get(n, vfs, path)) : ckpt_vfs_memory_get(n, vfs, path))
)

@@
expression P;
type T;
@@
(
- ckpt_vfs_s3_shared(NULL)
+ ckpt_status_of(ckpt_vfs_s3_shared())
|
- ckpt_vfs_s3_shared(&P)
+ ckpt_status_of(P = ckpt_vfs_s3_shared())
|
- ckpt_vfs_s3_shared((T)&P)
+ ckpt_status_of(P = ckpt_vfs_s3_shared())
)

@@
expression given, path, P;
type T;
@@
(
- ckpt_vfs_for_path(NULL, given, path)
+ ckpt_status_of(ckpt_vfs_for_path(given, path))
|
- ckpt_vfs_for_path(&P, given, path)
+ ckpt_status_of(P = ckpt_vfs_for_path(given, path))
|
- ckpt_vfs_for_path((T)&P, given, path)
+ ckpt_status_of(P = ckpt_vfs_for_path(given, path))
|
- ckpt_vfs_for_path(P, given, path)
+ ckpt_status_of(P ? (*P = ckpt_vfs_for_path(given, path)) : ckpt_vfs_for_path(given, path))
)

@@
expression v, P;
type T;
@@
(
- ckpt_variable_local(v, NULL)
+ ckpt_status_of(ckpt_variable_local(v))
|
- ckpt_variable_local(v, &P)
+ ckpt_status_of(P = ckpt_variable_local(v))
|
- ckpt_variable_local(v, (T)&P)
+ ckpt_status_of(P = ckpt_variable_local(v))
|
- ckpt_variable_local(v, P)
+ ckpt_status_of(P ? (*P = ckpt_variable_local(v)) : ckpt_variable_local(v))
)

// ckpt_object_child_at(&name, &child, o, i): two borrowed results, two functions
@@
expression N, C, O, I;
@@
(
- ckpt_object_child_at(NULL, &C, O, I)
+ ckpt_status_of(C = ckpt_object_child_at(O, I))
|
- ckpt_object_child_at(&N, NULL, O, I)
+ ckpt_status_of(N = ckpt_object_child_name(O, I))
|
- ckpt_object_child_at(&N, &C, O, I)
+ ckpt_status_of((N = ckpt_object_child_name(O, I)) ? (C = ckpt_object_child_at(O, I)) : NULL)
)

// a status nobody reads: the call alone
@@
expression E;
@@
- ckpt_status_of(E);
+ E;

// (void)ckpt_status_of(...): the same
@@
expression E;
@@
- (void)ckpt_status_of(E);
+ (void)(E);
