/*
 * The CLI's JSON writer (tools/json_writer.c): separators, nesting and
 * escaping are the writer's, and the text is what Python's json.dumps
 * writes for the same value (", " and ": ", ASCII only, surrogateescape for
 * bytes that are not UTF-8).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/cli.h"

Test(json_writer, nesting_commas_and_escapes)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int64_t dims[2] = { 2, 3 };
	ckpt_shape shape;
	jw w;

	cr_assert(f);
	ckpt_shape_make(&shape, 2, dims);
	jw_init(&w, f);
	jw_object_begin(&w);
	jw_key(&w, "a");
	jw_array_begin(&w);
	jw_array_end(&w);
	jw_key(&w, "b\"\n");
	jw_array_begin(&w);
	jw_int(&w, -1);
	jw_object_begin(&w);
	jw_object_end(&w);
	jw_string(&w, NULL);
	jw_string_n(&w, "\xc3\xa9\xff\x00", 4);
	jw_array_end(&w);
	jw_key(&w, "c");
	jw_double(&w, 0.1);
	jw_key(&w, "d");
	jw_bool(&w, 1);
	jw_key(&w, "e");
	jw_shape(&w, &shape);
	jw_key(&w, "f");
	jw_crc32(&w, 0xabcu);
	jw_key(&w, "g");
	jw_raw(&w, "3");
	jw_key(&w, "h");
	fputs("7.5", jw_value(&w));
	jw_object_end(&w);
	jw_end_line(&w);
	fclose(f);
	cr_assert_str_eq(text, "{\"a\": [], \"b\\\"\\n\": [-1, {}, null, \"\\u00e9\\udcff\\u0000\"], \"c\": 0.1, "
		"\"d\": true, \"e\": [2, 3], \"f\": \"0x00000abc\", \"g\": 3, \"h\": 7.5}\n");
	free(text);
}
