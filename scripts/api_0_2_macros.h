/*
 * Hints for Coccinelle (spatch --macro-file) when scripts/api_0_2_apply.sh
 * runs scripts/api_0_2.cocci: C11 keywords spatch 1.1 does not parse, so
 * that the functions using them are rewritten too, and test macros.
 */
#define _Thread_local
#define _Noreturn
#define _Alignas(x)
#define _Atomic
/* Criterion's test definitions, so that spatch parses the tests' bodies */
#define Test(suite, name, ...) void test_##suite##_##name(void)
#define ParameterizedTest(type, suite, name, ...) void test_##suite##_##name(type)
#define ParameterizedTestParameters(suite, name) void params_##suite##_##name(void)
