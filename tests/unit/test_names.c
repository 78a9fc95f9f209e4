/* test_names.c - the names an inode is known by (fs/names.h): newest
 * first, no duplicates, renames replace, the cap drops the oldest, names
 * too long are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fs/names.h"

static void add_and_order(void **state)
{
	struct fs_name *l = NULL;
	(void)state;

	assert_true(names_add(&l, 1, 10, "a"));
	assert_true(names_add(&l, 1, 11, "a")); /* same name, other parent */
	assert_true(names_add(&l, 1, 10, "b"));
	assert_int_equal(names_count(l), 3);
	assert_string_equal(l->name, "b");
	/* looked up again: moved to the front, not added twice */
	assert_true(names_add(&l, 1, 10, "a"));
	assert_int_equal(names_count(l), 3);
	assert_string_equal(l->name, "a");
	assert_int_equal(l->pino, 10);
	assert_int_equal(l->next->pino, 10);
	assert_string_equal(l->next->name, "b");
	assert_int_equal(l->next->next->pino, 11);
	names_free(&l);
	assert_null(l);
}

static void move(void **state)
{
	struct fs_name *l = NULL;
	(void)state;

	names_add(&l, 1, 10, "f");
	names_add(&l, 1, 12, "link");
	assert_true(names_move(&l, 1, 10, "f", 1, 20, "g"));
	assert_int_equal(names_count(l), 2);
	assert_int_equal(l->pino, 20);
	assert_string_equal(l->name, "g");
	assert_string_equal(l->next->name, "link");
	/* a name we did not know (looked up before a restart of the list):
	 * the new one is added all the same */
	assert_true(names_move(&l, 1, 99, "x", 1, 21, "y"));
	assert_int_equal(names_count(l), 3);
	assert_string_equal(l->name, "y");
	names_free(&l);
}

static void cap_and_long(void **state)
{
	struct fs_name *l = NULL;
	char nm[16], lng[NAME_BYTES + 1];
	(void)state;

	for (int i = 0; i < NAMES_MAX + 5; i++) {
		snprintf(nm, sizeof(nm), "n%d", i);
		assert_true(names_add(&l, 1, 10, nm));
	}
	assert_int_equal(names_count(l), NAMES_MAX);
	snprintf(nm, sizeof(nm), "n%d", NAMES_MAX + 4);
	assert_string_equal(l->name, nm);
	/* the oldest went */
	for (struct fs_name *e = l; e; e = e->next)
		assert_string_not_equal(e->name, "n0");
	memset(lng, 'x', NAME_BYTES);
	lng[NAME_BYTES] = '\0';
	assert_false(names_add(&l, 1, 10, lng));
	lng[NAME_BYTES - 1] = '\0'; /* 255 bytes: the longest a name can be */
	assert_true(names_add(&l, 1, 10, lng));
	assert_int_equal(strlen(l->name), NAME_BYTES - 1);
	names_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_and_order),
		cmocka_unit_test(move),
		cmocka_unit_test(cap_and_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
