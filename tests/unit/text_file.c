#include "text_file.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

const char *text_file(const char *text)
{
	static FILE *files[16];
	static char paths[16][64];
	static int next;
	int i = next++ % 16;
	if (files[i])
		fclose(files[i]);
	files[i] = tmpfile();
	assert_non_null(files[i]);
	assert_true(fputs(text, files[i]) >= 0);
	assert_int_equal(fflush(files[i]), 0);
	snprintf(paths[i], sizeof paths[i], "/proc/self/fd/%d", fileno(files[i]));
	return paths[i];
}
